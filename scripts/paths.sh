#!/usr/bin/env bash
# paths.sh — which source files of the daemon one request path visits,
# measured, not read: realmfs is built with coverage, and the same mount is
# run three times: M0 looks a file up and unmounts; M1 also opens it
# O_WRONLY|O_TRUNC and closes it; M2 also writes a line before the close.
# The files with blocks that M1 runs and M0 does not are the open(O_TRUNC)
# path's (its close included); those M2 runs and M1 does not, the
# write → close path's. docs/ARCHITECTURE.md quotes the result.
#
# Usage: scripts/paths.sh [REV]   (REV: a git revision to measure instead
#                                  of the work tree, in a temp worktree)
# Needs root (a FUSE mount), python3 and go.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d /tmp/realm-paths.XXXXXX)
cleanup() {
	fusermount3 -u "$work/mnt" 2>/dev/null || umount "$work/mnt" 2>/dev/null || true
	if [ -n "${REV:-}" ]; then git -C "$root" worktree remove --force "$work/src" >/dev/null 2>&1 || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
src=$root
if [ $# -gt 0 ]; then
	REV=$1
	git worktree add -q --detach "$work/src" "$REV"
	src=$work/src
fi
pkgs=github.com/realm-dev/realm/...
(cd "$src" && go build -cover -coverpkg="$pkgs" -o "$work/realmfs" ./cmd/realmfs)

# run N SCRIPT: mount, run the python SCRIPT on the mount, unmount; the
# coverage goes to $work/covN.
run() {
	local n=$1 script=$2
	rm -rf "${work:?}/backing" "${work:?}/mnt" "${work:?}/state"
	mkdir -p "$work/backing" "$work/mnt" "$work/state" "$work/cov$n"
	printf 'old content\n' >"$work/backing/notes.txt"
	GOCOVERDIR="$work/cov$n" "$work/realmfs" -f --state-dir "$work/state" \
		--audit-log "$work/state/audit.jsonl" "$work/backing" "$work/mnt" 2>"$work/log$n" &
	local pid=$!
	for _ in $(seq 200); do
		if mountpoint -q "$work/mnt"; then break; fi
		sleep 0.05
	done
	mountpoint -q "$work/mnt" || { cat "$work/log$n" >&2; exit 1; }
	python3 -c "import os; os.stat('$work/mnt/notes.txt'); $script"
	fusermount3 -u "$work/mnt" 2>/dev/null || umount "$work/mnt"
	wait "$pid"
	go tool covdata textfmt -i="$work/cov$n" -o "$work/cov$n.txt"
}

run 0 "pass"
run 1 "os.close(os.open('$work/mnt/notes.txt', os.O_WRONLY | os.O_TRUNC))"
run 2 "fd = os.open('$work/mnt/notes.txt', os.O_WRONLY | os.O_TRUNC); os.write(fd, b'new\n'); os.close(fd)"

# blocks covered, to tell a file the path only visits again from one it
# does not reach at all.
blocks() {
	awk 'NR > 1 && $NF > 0 { print $1 }' "$1" | sed 's#github.com/realm-dev/realm/##' | sort -u
}
blocks "$work/cov0.txt" >"$work/b0"
blocks "$work/cov1.txt" >"$work/b1"
blocks "$work/cov2.txt" >"$work/b2"
report() {
	local title=$1 new=$2 old=$3
	echo "## $title"
	comm -13 "$old" "$new" | cut -d: -f1 | sort | uniq -c | awk '{ printf "%6d new blocks  %s\n", $1, $2 }'
	local total fusefs
	total=$(comm -13 "$old" "$new" | cut -d: -f1 | sort -u | wc -l)
	fusefs=$(comm -13 "$old" "$new" | cut -d: -f1 | sort -u | grep -c '^fusefs/[^/]*$' || true)
	echo "files: $total, of them directly in fusefs: $fusefs"
	echo
}
report "open(O_TRUNC) and its close, beyond a lookup" "$work/b1" "$work/b0"
report "a write before the close, beyond open(O_TRUNC) and close" "$work/b2" "$work/b1"
