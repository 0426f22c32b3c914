#!/usr/bin/env bash
# bench.sh — the same workloads on a native directory and on realmfs mounts,
# interleaved, ROUNDS rounds; prints medians and ratios to native as Markdown,
# the daemons' CPU per file, then (COUNTS=1) what a created file costs in
# numbers a loaded machine does not blur: FUSE requests by opcode, the
# daemon's system calls by name and its CPU time, per file.
#
# Usage: scripts/bench.sh            (make bench)
#        ROUNDS=1 SIZE=64M FILES=500 SAVES=200 scripts/bench.sh   (a quick run)
#
# Environment:
#   ROUNDS=3          rounds (each runs every workload on every target)
#   SIZE=512M         size of the sequential write / read-back file
#   FILES=5000        number of 4 KiB files for create / stat / read
#   SAVES=2000        number of atomic saves
#   SQLITE_TXNS=2000  one-row transactions of the SQLite workloads (python3's
#                     sqlite3 module, synchronous=FULL, one commit each, on a
#                     fresh bench.db): sqlite_wal in WAL mode, sqlite_rollback
#                     with the rollback journal (journal_mode=DELETE); the time
#                     is the transactions' alone (not the create, not the close)
#   SRC=/usr/local/go/src/cmd   tree to untar, commit with git and rm -rf
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
#   NATIVE_FSYNCS=1   also time the create workload on a native directory
#                     where each file goes through a temp, fsync, rename and
#                     an fsync of the directory, as realmfs makes it (0 to
#                     skip; it runs no other workload)
#   JOURNAL=0         1 also measures a mount with -o journal=off (skipping
#                     the big-file workloads), paired by round with
#                     "realmfs": the journal's cost (docs/PERFORMANCE.md)
#   CEILING=0         1 also measures a mount whose policy makes every file
#                     coordinated (written in place: no temp, no commit at the
#                     close; skipping the big-file workloads), paired by round
#                     with "realmfs": the most a change of the write protocol
#                     could save (docs/PERFORMANCE.md, the in-place ceiling)
#   BASE_BIN=         also measure a mount of this realmfs binary (another
#                     commit's build; skipping the big-file workloads), paired
#                     by round with "realmfs": a change's effect, before and
#                     after, in one interleaved run
#   LOOPBACK=1        also measure go-fuse's example loopback filesystem (no
#                     guard, writes in place): what FUSE itself costs on this
#                     machine, the floor under any FUSE filesystem; 0 to skip
#   WORKLOADS=        only these kinds, e.g. "appends sparse1" (default: all;
#                     a kind that needs another's files needs it listed too, or the
#                     script stops: stat, read after create, git and grep after
#                     untar, rmrf after either)
#   REALMFS_OPTS=     extra -o options for the realmfs mounts (comma-separated)
#   REALMFS_FLAGS=    extra realmfs flags, e.g. "--policy FILE"
#   REALMFS_BIN=      use this realmfs instead of building ./cmd/realmfs
#   KEEP=0            1 keeps the work dir (results.txt holds every sample)
#   TIMED=1           0 skips the timed rounds (counts only)
#   COUNTS=1          0 skips the counts; they need root (strace attaches to
#                     the daemons) and measure, each on fresh mounts, create
#                     FILES x 4 KiB, tar x of COUNT_SRC, SAVES atomic saves
#                     and rm -rf of the untarred tree on native,
#                     native_fsyncs (create: each file through temp, fsync,
#                     rename, fsync of the directory, as realmfs does it),
#                     realmfs, realmfs_atomic (-o durability=atomic) and
#                     loopback: a plain run for the CPU (/proc/PID/stat) and
#                     the daemon's context switches (/proc/PID/task/*/status), one
#                     under strace -c -f for the system calls, one on a
#                     --debug mount for the requests
#   COUNT_SRC=$SRC    the tree the counts untar
#   COUNT_TARGETS="native native_fsyncs realmfs realmfs_atomic loopback"
#                     the targets counted
#
# Needs root for passthrough and for dropping caches (without root the
# read-back runs with warm caches and says so).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
SIZE=${SIZE:-512M}
FILES=${FILES:-5000}
SAVES=${SAVES:-2000}
SQLITE_TXNS=${SQLITE_TXNS:-2000}
SRC=${SRC:-/usr/local/go/src/cmd}
BENCH_DIR=${BENCH_DIR:-/var/tmp}
PASSTHROUGH_OFF=${PASSTHROUGH_OFF:-1}
GUARD_OFF=${GUARD_OFF:-1}
CONTROL=${CONTROL:-0}
JOURNAL=${JOURNAL:-0}
CEILING=${CEILING:-0}
BASE_BIN=${BASE_BIN:-}
LOOPBACK=${LOOPBACK:-1}
NATIVE_FSYNCS=${NATIVE_FSYNCS:-1}
REALMFS_OPTS=${REALMFS_OPTS:-}
REALMFS_FLAGS=${REALMFS_FLAGS:-}
KEEP=${KEEP:-0}
TIMED=${TIMED:-1}
COUNTS=${COUNTS:-1}
COUNT_SRC=${COUNT_SRC:-$SRC}
COUNT_TARGETS=${COUNT_TARGETS:-native native_fsyncs realmfs realmfs_atomic loopback}
if [ -n "${WORKLOADS:-}" ]; then
	# A kind that works on another's files, kept without it, would time
	# work on nothing (an rm -rf of no tree takes milliseconds).
	for need in "stat create" "stat2 create" "read create" "rmrf create untar" \
		"gitcommit untar" "gitstatus untar" "gitstatus2 untar" "grep untar" "grep2 untar"; do
		read -r -a words <<<"$need"
		kind=${words[0]}
		case " $WORKLOADS " in *" $kind "*) ;; *) continue ;; esac
		found=0
		for k in "${words[@]:1}"; do case " $WORKLOADS " in *" $k "*) found=1 ;; esac; done
		if [ "$found" = 0 ]; then
			alt=$(printf '%s or ' "${words[@]:1}")
			echo "bench.sh: WORKLOADS has $kind, which works on the files of ${alt% or } (list it too)" >&2
			exit 2
		fi
	done
fi
if [ "$LOOPBACK" != 1 ]; then # no loopback built: none counted
	COUNT_TARGETS=$(echo " $COUNT_TARGETS " | sed 's/ loopback / /')
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "$BENCH_DIR/realm-bench.XXXXXX")
bin=$work/bin
mkdir -p "$bin" "$work/home"

mounts=()
pids=()
cleanup() {
	local m p
	for m in "${mounts[@]}"; do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
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

# Targets: name and directory. native first (the reference). A FUSE
# target's daemon runs in the foreground, here, so its pid is known.
declare -A dir pid
names=(native realmfs)
dir[native]=$work/native
mkdir -p "${dir[native]}"

# wait_mount MNT PID LOG: wait until the daemon PID has mounted MNT.
wait_mount() {
	local i
	for i in $(seq 100); do
		mountpoint -q "$1" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench.sh: $1 did not mount; its log:" >&2
	cat "$3" >&2
	exit 1
}

mount_realmfs() { # name opts [flags...]
	local name=$1 opts=$2 backing=$work/backing-$1 mnt=$work/mnt-$1
	shift 2
	mkdir -p "$backing" "$mnt"
	local o=()
	[ -n "$opts" ] && o=(-o "$opts")
	# shellcheck disable=SC2086 # REALMFS_FLAGS is a list of words
	"${REALMFS_EXE:-$bin/realmfs}" -f "${o[@]}" $REALMFS_FLAGS "$@" "$backing" "$mnt" >>"$work/$name.log" 2>&1 &
	pid[$name]=$!
	pids+=($!)
	mounts+=("$mnt")
	wait_mount "$mnt" "${pid[$name]}" "$work/$name.log"
	dir[$name]=$mnt
}
mount_loopback() { # name [flags...]
	local name=$1 backing=$work/backing-$1 mnt=$work/mnt-$1
	shift
	mkdir -p "$backing" "$mnt"
	"$bin/loopback" "$@" "$mnt" "$backing" >>"$work/$name.log" 2>&1 &
	pid[$name]=$!
	pids+=($!)
	mounts+=("$mnt")
	wait_mount "$mnt" "${pid[$name]}" "$work/$name.log"
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
if [ "$JOURNAL" = 1 ]; then
	names+=(realmfs_journal=off)
	mount_realmfs realmfs_journal=off "$(join_opts ${REALMFS_OPTS:+$REALMFS_OPTS} journal=off)"
fi
if [ "$CEILING" = 1 ]; then
	# Every file coordinated: written in place, as SQLite's are, with the
	# guard and the journal as on "realmfs".
	printf 'version: 1\ncoordinated:\n  paths: ["**/*"]\n' >"$work/inplace.yaml"
	names+=(realmfs_inplace)
	mount_realmfs realmfs_inplace "$REALMFS_OPTS" --policy "$work/inplace.yaml"
fi
if [ -n "$BASE_BIN" ]; then
	cp "$BASE_BIN" "$bin/realmfs_base"
	names+=(realmfs_base)
	REALMFS_EXE=$bin/realmfs_base mount_realmfs realmfs_base "$REALMFS_OPTS"
fi
if [ "$LOOPBACK" = 1 ]; then
	mount_loopback loopback -q
	names+=(loopback)
fi
if [ "$NATIVE_FSYNCS" = 1 ]; then
	names+=(native_fsyncs)
	dir[native_fsyncs]=$work/native_fsyncs
	mkdir -p "${dir[native_fsyncs]}"
fi

results=$work/results.txt
cpus=$work/cpu.txt
counts=$work/counts.txt
: >"$results"
: >"$cpus"
: >"$counts"

export HOME=$work/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@realm.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@realm.invalid

# Workloads, in order: label | kind.
workloads=(
	"create $FILES x 4 KiB files|create"
	"create $FILES x 4 KiB files, 4 processes at once|create4"
	"stat $FILES files, cold|stat"
	"stat $FILES files, second run|stat2"
	"read $FILES files|read"
	"write $SIZE sequentially|write"
	"read $SIZE back, caches dropped|readback"
	"$SAVES atomic saves|atomic"
	"$SQLITE_TXNS SQLite transactions, WAL|sqlite_wal"
	"$SQLITE_TXNS SQLite transactions, rollback journal|sqlite_rollback"
	"100 appends to a 256 MiB file|appends"
	"1-byte write into a 1 GiB sparse file|sparse1"
	"untar $(basename "$SRC") ($src_files files)|untar"
	"git add + commit|gitcommit"
	"git status, cold|gitstatus"
	"git status, second run|gitstatus2"
	"grep -r over the tree, cold|grep"
	"grep -r over the tree, second run|grep2"
	"rm -rf the files and the tree|rmrf"
)

# WORKLOADS="appends sparse1" keeps only the workloads of those kinds (a kind
# that reads another's files, stat after create, git after untar, needs
# that one listed too).
if [ -n "${WORKLOADS:-}" ]; then
	kept=()
	for wl in "${workloads[@]}"; do
		case " $WORKLOADS " in *" ${wl##*|} "*) kept+=("$wl") ;; esac
	done
	workloads=("${kept[@]}")
fi
if ! command -v python3 >/dev/null; then
	kept=()
	for wl in "${workloads[@]}"; do
		case ${wl##*|} in sqlite_*) ;; *) kept+=("$wl") ;; esac
	done
	[ "${#kept[@]}" = "${#workloads[@]}" ] ||
		echo "bench.sh: the SQLite workloads need python3 (scripts/install-deps.sh); skipped" >&2
	workloads=("${kept[@]}")
fi

# sqlite.py DB MODE N: a fresh database DB in journal mode MODE (WAL or
# DELETE) with synchronous=FULL, then N transactions of one INSERT of a
# 100-byte value each, committed one by one; prints the seconds the N
# transactions took, as benchtool prints a workload's.
cat >"$work/sqlite.py" <<'EOF'
import sqlite3
import sys
import time

db, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
conn = sqlite3.connect(db, isolation_level=None)  # BEGIN and COMMIT are ours
got = conn.execute("PRAGMA journal_mode=" + mode).fetchone()[0]
if got.upper() != mode.upper():
    sys.exit("sqlite.py: journal_mode=%s on %s is %s" % (mode, db, got))
conn.execute("PRAGMA synchronous=FULL")
conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
start = time.perf_counter()
for i in range(n):
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t(v) VALUES(?)", ("%0100d" % i,))
    conn.execute("COMMIT")
secs = time.perf_counter() - start
conn.close()
print("%.6f" % secs)
EOF

# items KIND: what a workload's daemon CPU is divided by (files, saves,
# transactions; 1 for the big file).
items() {
	case $1 in
	create | create4 | stat | stat2 | read) echo "$FILES" ;;
	atomic) echo "$SAVES" ;;
	sqlite_wal | sqlite_rollback) echo "$SQLITE_TXNS" ;;
	appends) echo 100 ;;
	write | readback | sparse1) echo 1 ;;
	rmrf) echo $((FILES + src_files)) ;;
	*) echo "$src_files" ;;
	esac
}

# role TARGET KIND: rec (run and record), setup (run, for the workloads that
# follow, not recorded) or skip. The passthrough=off mount measures reads
# only; the guard=off and control mounts skip the big-file workloads, where
# the guard does nothing.
role() {
	case $1/$2 in
	realmfs_passthrough=off/read | realmfs_passthrough=off/readback) echo rec ;;
	realmfs_passthrough=off/create | realmfs_passthrough=off/write) echo setup ;;
	realmfs_passthrough=off/*) echo skip ;;
	native_fsyncs/create) echo rec ;;
	native_fsyncs/*) echo skip ;;
	realmfs_guard=off/write | realmfs_guard=off/readback | realmfs_guard=off/appends | realmfs_guard=off/sparse1) echo skip ;;
	realmfs_again/write | realmfs_again/readback | realmfs_again/appends | realmfs_again/sparse1) echo skip ;;
	realmfs_journal=off/write | realmfs_journal=off/readback | realmfs_journal=off/appends | realmfs_journal=off/sparse1) echo skip ;;
	realmfs_inplace/write | realmfs_inplace/readback | realmfs_inplace/appends | realmfs_inplace/sparse1) echo skip ;;
	realmfs_base/write | realmfs_base/readback | realmfs_base/appends | realmfs_base/sparse1) echo skip ;;
	*) echo rec ;;
	esac
}

step() { # kind dir target → seconds on stdout
	local kind=$1 d=$2
	case $kind in
	create)
		if [ "$3" = native_fsyncs ]; then
			"$bt" createsafe "$d/small" "$FILES" 4K
		else
			"$bt" create "$d/small" "$FILES" 4K
		fi
		;;
	create4) "$bt" createpar "$d/par" "$FILES" 4K 4 ;; # parallel writers, each its own process and directory
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
	sqlite_wal | sqlite_rollback)
		# sqlite.py times its transactions itself and prints the seconds;
		# the database and its journals go, for the next round.
		local mode=WAL rc=0
		if [ "$kind" = sqlite_rollback ]; then mode=DELETE; fi
		python3 "$work/sqlite.py" "$d/bench.db" "$mode" "$SQLITE_TXNS" || rc=$?
		rm -f "$d/bench.db" "$d/bench.db-wal" "$d/bench.db-shm" "$d/bench.db-journal"
		return "$rc"
		;;
	appends)
		# The file is made untimed; each >> is one open, write and close.
		"$bt" write "$d/log" 256M >/dev/null
		"$bt" run -- sh -c "for i in \$(seq 100); do echo line \$i >>'$d/log'; done"
		rm -f "$d/log"
		;;
	sparse1)
		truncate -s 1G "$d/sparse"
		"$bt" run -- sh -c "printf x | dd of='$d/sparse' bs=1 seek=512M count=1 conv=notrunc status=none"
		rm -f "$d/sparse"
		;;
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
	rmrf) "$bt" run -- rm -rf "$d/small" "$d/tree" ;;
	esac
}

# cold empties the kernel's caches of names, inodes and pages before a
# first run.
cold() {
	if [ "$is_root" = 1 ]; then "$bt" dropcaches; else sleep 1.1; fi
}

# settle: wait until no daemon's CPU time moves by more than a tick in
# 0.2 s (at most 60 s each). Work a daemon leaves for when its mount is
# idle (the journal's prune) is then done before any target is timed, and
# counted in the daemon CPU of the workload that left it.
settle() {
	local p a b i
	for p in "${pid[@]}"; do
		a=$("$bt" cpu "$p") || continue
		for i in $(seq 300); do
			sleep 0.2
			b=$("$bt" cpu "$p") || break
			awk -v a="$a" -v b="$b" 'BEGIN { exit !(b - a <= 0.011) }' && break
			a=$b
		done
	done
}

total=$((ROUNDS * ${#workloads[@]}))
n=0
[ "$TIMED" = 1 ] || ROUNDS=0
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
			settle
			c0=
			[ -n "${pid[$t]:-}" ] && c0=$("$bt" cpu "${pid[$t]}")
			if ! secs=$(step "$kind" "${dir[$t]}/r$round" "$t"); then
				echo "bench.sh: $label failed on $t (round $round)" >&2
				secs=FAIL
			fi
			[ "$r" = setup ] && continue
			printf '%s\t%s\t%s\t%s\n' "${label// /_}" "$t" "$secs" "$round" >>"$results"
			if [ -n "$c0" ] && [ "$secs" != FAIL ]; then
				settle
				c1=$("$bt" cpu "${pid[$t]}")
				# milliseconds of daemon CPU per item, in the results' format
				awk -v a="$c0" -v b="$c1" -v n="$(items "$kind")" -v l="${label// /_}" -v t="$t" -v r="$round" \
					'BEGIN { printf "%s\t%s\t%.6f\t%s\n", l, t, (b - a) * 1000 / n, r }' >>"$cpus"
			fi
		done
	done
	for t in "${order[@]}"; do
		rm -rf "${dir[$t]:?}/r$round"
	done
done

# Counts. Each FUSE target gets two fresh mounts: a plain one, on which
# the workload runs once for the daemon's CPU and once under strace -c -f
# for its system calls, and a --debug one for its requests. A native
# target's CPU and system calls are the workload's own.
count_src_files=0
if [ "$COUNTS" = 1 ]; then
	if [ "$is_root" != 1 ] || ! command -v strace >/dev/null; then
		echo "bench.sh: the counts need root and strace (scripts/install-deps.sh); skipped" >&2
		COUNTS=0
	fi
fi
if [ "$COUNTS" = 1 ]; then
	[ -d "$COUNT_SRC" ] || { echo "bench.sh: COUNT_SRC=$COUNT_SRC is not a directory" >&2; exit 2; }
	tar -C "$COUNT_SRC" -cf "$work/count-src.tar" .
	count_src_files=$(tar -tf "$work/count-src.tar" | grep -vc '/$' || true)
	count_workloads=("create|$FILES" "untar|$count_src_files" "atomic|$SAVES" "rm|$count_src_files")
	# cwork KIND DIR: the workload itself, as a command line. rm removes
	# the tree the untar before it made in the same place (DIR/rm-a:
	# DIR/untar-a/tree).
	cwork() {
		case $1 in
		create) echo "$bt" create "$2/small" "$FILES" 4K ;;
		createsafe) echo "$bt" createsafe "$2/small" "$FILES" 4K ;;
		untar) echo mkdir -p "$2/tree" '&&' tar -C "$2/tree" -xf "$work/count-src.tar" ;;
		atomic) echo "$bt" atomic "$2/atomic" "$SAVES" ;;
		rm)
			local base=${2##*/}
			echo rm -rf "${2%/*}/untar${base#rm}/tree"
			;;
		esac
	}
	record() { # workload target < "metric value" lines
		local l
		while read -r l; do printf '%s\t%s\t%s\n' "$1" "$2" "${l// /$'\t'}"; done >>"$counts"
	}
	count_label() { # kind → the row label
		case $1 in
		create) echo "create_${FILES}_x_4_KiB" ;;
		untar) echo "untar_$(basename "$COUNT_SRC")_(${count_src_files}_files)" ;;
		atomic) echo "${SAVES}_atomic_saves" ;;
		rm) echo "rm_-rf_of_the_untarred_tree" ;;
		esac
	}
	# count_native TARGET KIND WORK
	count_native() {
		local t=$1 kind=$2 w=$3 d=$work/count-$1 label
		label=$(count_label "$kind")
		mkdir -p "$d"
		rm -rf "${d:?}"/*
		if [ "$kind" = rm ]; then # the trees it removes, made unmeasured
			sh -c "$(cwork untar "$d/untar-a") && $(cwork untar "$d/untar-b")"
		fi
		echo "cpu_s $("$bt" cpurun -- sh -c "$(cwork "$w" "$d/$kind-a")")" | record "$label" "$t"
		strace -c -f -o "$work/strace.$t.$kind" sh -c "$(cwork "$w" "$d/$kind-b")" >/dev/null
		"$bt" stracec "$work/strace.$t.$kind" | record "$label" "$t"
		echo "files $(items_count "$kind")" | record "$label" "$t"
		rm -rf "$d"
	}
	items_count() { case $1 in create) echo "$FILES" ;; untar | rm) echo "$count_src_files" ;; atomic) echo "$SAVES" ;; esac; }
	# count_fuse TARGET KIND: the daemon of ${dir[TARGET]} (plain) and of
	# ${dir[TARGET_debug]} (--debug).
	count_fuse() {
		local t=$1 kind=$2 d=${dir[$1]} label c0 c1 s0 s1 sp off
		label=$(count_label "$kind")
		c0=$("$bt" cpu "${pid[$t]}")
		s0=$("$bt" ctxsw "${pid[$t]}")
		sh -c "$(cwork "$kind" "$d/$kind-a")" >/dev/null
		c1=$("$bt" cpu "${pid[$t]}")
		s1=$("$bt" ctxsw "${pid[$t]}")
		awk -v a="$c0" -v b="$c1" 'BEGIN { printf "cpu_s %.2f\n", b - a }' | record "$label" "$t"
		echo "ctxsw $((s1 - s0))" | record "$label" "$t"
		: >"$work/strace.$t.$kind.err"
		strace -c -f -p "${pid[$t]}" -o "$work/strace.$t.$kind" 2>"$work/strace.$t.$kind.err" &
		sp=$!
		"$bt" waitfor "$work/strace.$t.$kind.err" 'attached'
		sh -c "$(cwork "$kind" "$d/$kind-b")" >/dev/null
		kill -INT "$sp"
		wait "$sp" || true
		"$bt" stracec "$work/strace.$t.$kind" | record "$label" "$t"
		d=${dir[${t}_debug]}
		off=$(stat -c %s "$work/${t}_debug.log")
		sh -c "$(cwork "$kind" "$d/$kind")" >/dev/null
		tail -c +$((off + 1)) "$work/${t}_debug.log" >"$work/debug.$t.$kind"
		"$bt" opcodes "$work/debug.$t.$kind" | record "$label" "$t"
		echo "files $(items_count "$kind")" | record "$label" "$t"
	}
	unmount_target() { # name
		fusermount3 -u "${dir[$1]}"
		wait "${pid[$1]}" || true
	}
	echo "counting..." >&2
	for wl in "${count_workloads[@]}"; do
		kind=${wl%%|*}
		if [[ " $COUNT_TARGETS " == *" native "* ]]; then
			echo "counts: $kind on native" >&2
			count_native native "$kind" "$kind"
		fi
		if [ "$kind" = create ] && [[ " $COUNT_TARGETS " == *" native_fsyncs "* ]]; then
			echo "counts: $kind on native_fsyncs" >&2
			count_native native_fsyncs "$kind" createsafe
		fi
		for t in realmfs realmfs_atomic loopback; do
			[[ " $COUNT_TARGETS " == *" $t "* ]] || continue
			echo "counts: $kind on $t" >&2
			case $t in
			realmfs)
				mount_realmfs "c_$t" "$REALMFS_OPTS"
				mount_realmfs "c_${t}_debug" "$REALMFS_OPTS" --debug
				;;
			realmfs_atomic)
				mount_realmfs "c_$t" "$(join_opts ${REALMFS_OPTS:+$REALMFS_OPTS} durability=atomic)"
				mount_realmfs "c_${t}_debug" "$(join_opts ${REALMFS_OPTS:+$REALMFS_OPTS} durability=atomic)" --debug
				;;
			loopback)
				mount_loopback "c_$t" -q
				mount_loopback "c_${t}_debug" -debug
				;;
			esac
			count_fuse "c_$t" "$kind"
			unmount_target "c_$t"
			unmount_target "c_${t}_debug"
		done
	done
	sed -i 's/\tc_/\t/' "$counts"
fi

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
echo "- SIZE=$SIZE FILES=$FILES SAVES=$SAVES SQLITE_TXNS=$SQLITE_TXNS SRC=$SRC${COUNTS:+ COUNTS=$COUNTS COUNT_SRC=$COUNT_SRC}"
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$is_root" = 1 ] || echo "- not root: caches were NOT dropped before the read-back; passthrough is off on every mount"
echo
pairs=()
[ "$GUARD_OFF" = 1 ] && pairs+=(realmfs/realmfs_guard=off)
[ "$CONTROL" = 1 ] && pairs+=(realmfs/realmfs_again)
[ "$CONTROL" = 1 ] && [ "$GUARD_OFF" = 1 ] && pairs+=(realmfs_again/realmfs_guard=off)
[ "$JOURNAL" = 1 ] && pairs+=(realmfs/realmfs_journal=off)
[ "$CEILING" = 1 ] && pairs+=(realmfs/realmfs_inplace)
[ "$CEILING" = 1 ] && [ "$LOOPBACK" = 1 ] && pairs+=(realmfs_inplace/loopback)
[ -n "$BASE_BIN" ] && pairs+=(realmfs/realmfs_base)
[ -n "$BASE_BIN" ] && [ "$LOOPBACK" = 1 ] && pairs+=(realmfs_base/loopback)
[ "$LOOPBACK" = 1 ] && pairs+=(realmfs/loopback)
[ "$NATIVE_FSYNCS" = 1 ] && pairs+=(realmfs/native_fsyncs)
# measured FILE PAIR...: the pairs A/B of which FILE has samples of both
# targets (WORKLOADS may leave a target none: native_fsyncs runs create only).
measured() {
	local f=$1 p
	shift
	for p in "$@"; do
		if awk -F'\t' -v a="${p%%/*}" -v b="${p#*/}" '$2 == a { x = 1 } $2 == b { y = 1 } END { exit !(x && y) }' "$f"; then
			echo "$p"
		fi
	done
}
if [ "$TIMED" = 1 ]; then
	mapfile -t pairs < <(measured "$results" "${pairs[@]}")
	"$bt" report "$results" "${pairs[@]}" | sed 's/_/ /g'
	if [ -s "$cpus" ]; then
		echo
		echo "### Daemon CPU per item (ms: per file; per save; per transaction; per big file)"
		echo
		# loopback first, so the ratios are over the loopback's
		{ grep -P '\tloopback\t' "$cpus" || true; grep -vP '\tloopback\t' "$cpus" || true; } >"$cpus.sorted"
		cpairs=()
		[ "$LOOPBACK" = 1 ] && cpairs+=(realmfs/loopback)
		[ "$CEILING" = 1 ] && [ "$LOOPBACK" = 1 ] && cpairs+=(realmfs_inplace/loopback)
		[ "$CEILING" = 1 ] && cpairs+=(realmfs/realmfs_inplace)
		[ -n "$BASE_BIN" ] && [ "$LOOPBACK" = 1 ] && cpairs+=(realmfs_base/loopback)
		[ -n "$BASE_BIN" ] && cpairs+=(realmfs/realmfs_base)
		mapfile -t cpairs < <(measured "$cpus.sorted" "${cpairs[@]}")
		"$bt" report "$cpus.sorted" "${cpairs[@]}" | sed 's/_/ /g; s/ (s)/ (ms)/g'
	fi
fi
if [ "$COUNTS" = 1 ]; then
	echo
	echo "### Per file: requests, system calls, CPU"
	"$bt" counttable "$counts" | sed 's/_/ /g'
fi
