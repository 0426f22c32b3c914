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
#   GUARD_OFF=1       also measure a mount whose policy has no credential
#                     globs (defaults: false), for the guard's cost; 0 to skip
#   CONTROL=0         1 also measures a second mount identical to "realmfs"
#                     (skipping the big-file workloads): realmfs over it shows
#                     how far two runs of the same thing differ on this
#                     machine, the resolution of every other ratio
#   LOOPBACK=1        also measure go-fuse's example loopback filesystem (no
#                     guard, writes in place): what FUSE itself costs on this
#                     machine, the floor under any FUSE filesystem; 0 to skip
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
GUARD_OFF=${GUARD_OFF:-1}
CONTROL=${CONTROL:-0}
LOOPBACK=${LOOPBACK:-1}
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
	if [ "$LOOPBACK" = 1 ]; then go build -o "$bin/loopback" github.com/hanwen/go-fuse/v2/example/loopback; fi
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

mount_realmfs() { # name opts [flags...]
	local name=$1 opts=$2 backing=$work/backing-$1 mnt=$work/mnt-$1
	shift 2
	mkdir -p "$backing" "$mnt"
	local o=()
	[ -n "$opts" ] && o=(-o "$opts")
	# shellcheck disable=SC2086 # REALMFS_FLAGS is a list of words
	"$bin/realmfs" "${o[@]}" $REALMFS_FLAGS "$@" "$backing" "$mnt"
	mounts+=("$mnt")
	dir[$name]=$mnt
}
join_opts() { local IFS=,; echo "$*"; }
mount_realmfs realmfs "$REALMFS_OPTS"
if [ "$PASSTHROUGH_OFF" = 1 ]; then
	names+=(realmfs_passthrough=off)
	mount_realmfs realmfs_passthrough=off "$(join_opts ${REALMFS_OPTS:+$REALMFS_OPTS} passthrough=off)"
fi
if [ "$GUARD_OFF" = 1 ]; then
	# The same mount with a policy that denies nothing: the difference to
	# "realmfs" is what the credential guard costs.
	printf 'version: 1\ncredentials:\n  defaults: false\n' >"$work/noglobs.yaml"
	names+=(realmfs_guard=off)
	mount_realmfs realmfs_guard=off "$REALMFS_OPTS" --policy "$work/noglobs.yaml"
fi
if [ "$CONTROL" = 1 ]; then
	names+=(realmfs_again)
	mount_realmfs realmfs_again "$REALMFS_OPTS"
fi
if [ "$LOOPBACK" = 1 ]; then
	mkdir -p "$work/backing-loopback" "$work/mnt-loopback"
	"$bin/loopback" -q "$work/mnt-loopback" "$work/backing-loopback" >"$work/loopback.log" 2>&1 &
	for _ in $(seq 50); do
		mountpoint -q "$work/mnt-loopback" && break
		sleep 0.1
	done
	mountpoint -q "$work/mnt-loopback" || { echo "bench.sh: loopback did not mount" >&2; exit 1; }
	mounts+=("$work/mnt-loopback")
	names+=(loopback)
	dir[loopback]=$work/mnt-loopback
fi

results=$work/results.txt
: >"$results"

export HOME=$work/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@realm.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@realm.invalid

# Workloads, in order: label | kind.
workloads=(
	"create $FILES x 4 KiB files|create"
	"stat $FILES files, cold|stat"
	"stat $FILES files, second run|stat2"
	"read $FILES files|read"
	"write $SIZE sequentially|write"
	"read $SIZE back, caches dropped|readback"
	"$SAVES atomic saves|atomic"
	"untar $(basename "$SRC") ($src_files files)|untar"
	"git add + commit|gitcommit"
	"git status, cold|gitstatus"
	"git status, second run|gitstatus2"
	"grep -r over the tree, cold|grep"
	"grep -r over the tree, second run|grep2"
)

# role TARGET KIND: rec (run and record), setup (run, for the workloads that
# follow, not recorded) or skip. The passthrough=off mount measures reads
# only; the guard=off and control mounts skip the big-file workloads, where
# the guard does nothing.
role() {
	case $1/$2 in
	realmfs_passthrough=off/read | realmfs_passthrough=off/readback) echo rec ;;
	realmfs_passthrough=off/create | realmfs_passthrough=off/write) echo setup ;;
	realmfs_passthrough=off/*) echo skip ;;
	realmfs_guard=off/write | realmfs_guard=off/readback) echo skip ;;
	realmfs_again/write | realmfs_again/readback) echo skip ;;
	*) echo rec ;;
	esac
}

step() { # kind dir → seconds on stdout
	local kind=$1 d=$2
	case $kind in
	create) "$bt" create "$d/small" "$FILES" 4K ;;
	stat)
		# Cold: the kernel's dentries and inodes dropped (root), so every
		# lstat is a lookup the daemon answers, on every target alike (the
		# native one reads its inodes back too); without root, past the
		# unwatched mount's 1 s timeouts.
		cold
		"$bt" stat "$d/small" "$FILES"
		;;
	stat2)
		# A second run: the first (untimed) one fills the kernel's cache,
		# which another target's cold step may have emptied since.
		"$bt" stat "$d/small" "$FILES" >/dev/null
		"$bt" stat "$d/small" "$FILES"
		;;
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
	gitstatus)
		cold
		"$bt" run -- git -C "$d/tree" status --porcelain
		;;
	gitstatus2)
		"$bt" run -- git -C "$d/tree" status --porcelain >/dev/null
		"$bt" run -- git -C "$d/tree" status --porcelain
		;;
	grep)
		cold
		"$bt" run -- sh -c "grep -r -c -e func '$d/tree' >/dev/null"
		;;
	grep2)
		"$bt" run -- sh -c "grep -r -c -e func '$d/tree' >/dev/null" >/dev/null
		"$bt" run -- sh -c "grep -r -c -e func '$d/tree' >/dev/null"
		;;
	esac
}

# cold empties the kernel's caches of names, inodes and pages before a
# first run.
cold() {
	if [ "$is_root" = 1 ]; then "$bt" dropcaches; else sleep 1.1; fi
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
		IFS='|' read -r label kind <<<"$wl"
		n=$((n + 1))
		printf '[%d/%d] round %d: %s\n' "$n" "$total" "$round" "$label" >&2
		for t in "${order[@]}"; do
			r=$(role "$t" "$kind")
			[ "$r" = skip ] && continue
			if ! secs=$(step "$kind" "${dir[$t]}/r$round"); then
				echo "bench.sh: $label failed on $t (round $round)" >&2
				secs=FAIL
			fi
			[ "$r" = setup ] && continue
			printf '%s\t%s\t%s\t%s\n' "${label// /_}" "$t" "$secs" "$round" >>"$results"
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
pairs=()
[ "$GUARD_OFF" = 1 ] && pairs+=(realmfs/realmfs_guard=off)
[ "$CONTROL" = 1 ] && pairs+=(realmfs/realmfs_again)
[ "$CONTROL" = 1 ] && [ "$GUARD_OFF" = 1 ] && pairs+=(realmfs_again/realmfs_guard=off)
[ "$LOOPBACK" = 1 ] && pairs+=(realmfs/loopback)
"$bt" report "$results" "${pairs[@]}" | sed 's/_/ /g'
