#!/usr/bin/env bash
# bench.sh — the same workloads on a native directory and on realmfs mounts,
# interleaved, ROUNDS rounds; prints medians and ratios to native as Markdown.
#
# Usage: scripts/bench.sh            (make bench)
#        ROUNDS=1 SIZE=64M FILES=500 SAVES=200 scripts/bench.sh   (a quick run)
#
# Environment:
#   ROUNDS=3          rounds (each runs every workload on every target)
#   SIZE=1G           size of the sequential write / read-back file
#   FILES=5000        number of 4 KiB files for create / stat / read
#   SAVES=2000        number of atomic saves
#   SRC=/usr/local/go/src/net   tree to untar and commit with git
#   BENCH_DIR=/var/tmp          where the work dir goes (native dir and both
#                               backing dirs live there: one filesystem)
#   PASSTHROUGH_OFF=1 also measure a mount with -o passthrough=off
#                     (read workloads only; 0 to skip)
#   REALMFS_OPTS=     extra -o options for the realmfs mounts (comma-separated)
#   REALMFS_FLAGS=    extra realmfs flags, e.g. "--policy FILE"
#   REALMFS_BIN=      use this realmfs instead of building ./cmd/realmfs
#   KEEP=0            1 keeps the work dir (results.txt holds every sample)
#
# Needs root for passthrough and for dropping caches (without root the
# read-back runs with warm caches and says so).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
SIZE=${SIZE:-1G}
FILES=${FILES:-5000}
SAVES=${SAVES:-2000}
SRC=${SRC:-/usr/local/go/src/net}
BENCH_DIR=${BENCH_DIR:-/var/tmp}
PASSTHROUGH_OFF=${PASSTHROUGH_OFF:-1}
REALMFS_OPTS=${REALMFS_OPTS:-}
REALMFS_FLAGS=${REALMFS_FLAGS:-}
KEEP=${KEEP:-0}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "$BENCH_DIR/realm-bench.XXXXXX")
bin=$work/bin
mkdir -p "$bin" "$work/home"

mounts=()
cleanup() {
	local m
	for m in "${mounts[@]}"; do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	if [ "$KEEP" = 1 ]; then
		echo "kept $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

echo "building realmfs and benchtool..." >&2
(
	cd "$root"
	if [ -n "${REALMFS_BIN:-}" ]; then cp "$REALMFS_BIN" "$bin/realmfs"; else go build -o "$bin/realmfs" ./cmd/realmfs; fi
	go build -o "$bin/benchtool" ./internal/benchtool
)
bt=$bin/benchtool

[ -d "$SRC" ] || { echo "bench.sh: SRC=$SRC is not a directory" >&2; exit 2; }
tar -C "$SRC" -cf "$work/src.tar" .
src_files=$(tar -tf "$work/src.tar" | grep -vc '/$' || true)

is_root=0
[ "$(id -u)" = 0 ] && is_root=1

# Targets: name and directory. native first (the reference).
declare -A dir
names=(native realmfs)
dir[native]=$work/native
mkdir -p "${dir[native]}"

mount_realmfs() { # name opts
	local name=$1 opts=$2 backing=$work/backing-$1 mnt=$work/mnt-$1
	mkdir -p "$backing" "$mnt"
	local o=()
	[ -n "$opts" ] && o=(-o "$opts")
	# shellcheck disable=SC2086 # REALMFS_FLAGS is a list of words
	"$bin/realmfs" "${o[@]}" $REALMFS_FLAGS "$backing" "$mnt"
	mounts+=("$mnt")
	dir[$name]=$mnt
}
join_opts() { local IFS=,; echo "$*"; }
mount_realmfs realmfs "$REALMFS_OPTS"
if [ "$PASSTHROUGH_OFF" = 1 ]; then
	names+=(realmfs_passthrough=off)
	mount_realmfs realmfs_passthrough=off "$(join_opts ${REALMFS_OPTS:+$REALMFS_OPTS} passthrough=off)"
fi

results=$work/results.txt
: >"$results"

export HOME=$work/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@realm.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@realm.invalid

# Workloads, in order: label | on the passthrough=off mount: rec (measured),
# setup (run for the read workloads that follow, not recorded) or skip | kind.
workloads=(
	"create $FILES x 4 KiB files|setup|create"
	"stat $FILES files|skip|stat"
	"read $FILES files|rec|read"
	"write $SIZE sequentially|setup|write"
	"read $SIZE back, caches dropped|rec|readback"
	"$SAVES atomic saves|skip|atomic"
	"untar $(basename "$SRC") ($src_files files)|skip|untar"
	"git add + commit|skip|gitcommit"
	"git status|skip|gitstatus"
)

step() { # kind dir → seconds on stdout
	local kind=$1 d=$2
	case $kind in
	create) "$bt" create "$d/small" "$FILES" 4K ;;
	stat) "$bt" stat "$d/small" "$FILES" ;;
	read) "$bt" read "$d/small" "$FILES" ;;
	write) "$bt" write "$d/big" "$SIZE" ;;
	readback)
		if [ "$is_root" = 1 ]; then "$bt" dropcaches; fi
		"$bt" readfile "$d/big"
		;;
	atomic) "$bt" atomic "$d/atomic" "$SAVES" ;;
	untar) mkdir -p "$d/tree" && "$bt" run -- tar -C "$d/tree" -xf "$work/src.tar" ;;
	gitcommit)
		git -C "$d/tree" init -q
		"$bt" run -- sh -c "git -C '$d/tree' add -A && git -C '$d/tree' commit -q -m bench"
		;;
	gitstatus) "$bt" run -- git -C "$d/tree" status --porcelain ;;
	esac
}

total=$((ROUNDS * ${#workloads[@]}))
n=0
for round in $(seq 1 "$ROUNDS"); do
	# Rotate the target order each round so no target always goes first.
	order=()
	for i in "${!names[@]}"; do
		order+=("${names[$(((i + round - 1) % ${#names[@]}))]}")
	done
	for t in "${order[@]}"; do
		mkdir -p "${dir[$t]}/r$round"
	done
	for wl in "${workloads[@]}"; do
		IFS='|' read -r label nopt kind <<<"$wl"
		n=$((n + 1))
		printf '[%d/%d] round %d: %s\n' "$n" "$total" "$round" "$label" >&2
		for t in "${order[@]}"; do
			if [ "$t" = realmfs_passthrough=off ] && [ "$nopt" = skip ]; then
				continue
			fi
			if ! secs=$(step "$kind" "${dir[$t]}/r$round"); then
				echo "bench.sh: $label failed on $t (round $round)" >&2
				secs=FAIL
			fi
			if [ "$t" = realmfs_passthrough=off ] && [ "$nopt" = setup ]; then
				continue
			fi
			printf '%s\t%s\t%s\n' "${label// /_}" "$t" "$secs" >>"$results"
		done
	done
	for t in "${order[@]}"; do
		rm -rf "${dir[$t]:?}/r$round"
	done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
fs=$(df -T "$work" | awk 'NR==2 {print $2 " (" $1 ")"}')
echo
echo "## realmfs benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- kernel: $(uname -sr)"
echo "- CPU: ${cpu:-unknown}, $(nproc) cores; memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
echo "- filesystem under test: $fs (native dir and backing dirs on the same one)"
echo "- realmfs: $("$bin/realmfs" --version 2>&1 | head -1), options: ${REALMFS_OPTS:-(defaults)}${REALMFS_FLAGS:+, flags: $REALMFS_FLAGS}"
echo "- rounds: $ROUNDS, interleaved (each workload runs on every target before the next), target order rotated per round"
echo "- SIZE=$SIZE FILES=$FILES SAVES=$SAVES SRC=$SRC"
[ "$is_root" = 1 ] || echo "- not root: caches were NOT dropped before the read-back; passthrough is off on every mount"
echo
"$bt" report "$results" | sed 's/_/ /g'
