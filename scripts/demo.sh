#!/usr/bin/env bash
# demo.sh mounts a demo workspace with realm's default policy and shows the
# guard at work: ordinary work succeeds, escapes and credentials are refused
# and audited, and the files stay as they were; the journal lists every
# change made. Then it unmounts.
set -euo pipefail
cd "$(dirname "$0")/.."
realmfs=${REALMFS:-bin/realmfs}
demo=$(mktemp -d /tmp/realm-demo.XXXXXX)
ws=$demo/workspace mnt=$demo/mnt audit=$demo/audit.jsonl
mkdir -p "$ws/src" "$mnt"
printf 'package main\n\nfunc main() { println("hello from the workspace") }\n' >"$ws/src/main.go"
printf 'API_TOKEN=s3cr3t\n' >"$ws/.env"
ln -s /etc/passwd "$ws/passwd-link"

cleanup() { fusermount3 -u "$mnt" 2>/dev/null || true; rm -rf "$demo"; }
trap cleanup EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
try() { step "$*"; if (cd "$mnt" && eval "$*"); then :; else echo "(exit $?)"; fi; }

step "realmfs $ws $mnt --audit-log $audit"
"$realmfs" "$ws" "$mnt" --audit-log "$audit"
grep " $mnt " /proc/self/mountinfo | sed 's/^/  /'

try 'ls -la'
try 'cat src/main.go'
try 'mkdir -p notes && echo "written through the mount" > notes/todo.txt && cat notes/todo.txt'
try 'mv notes/todo.txt notes/done.txt && ls notes'
echo; echo "--- refused: a symlink out of the workspace"
try 'cat passwd-link'
try 'ln -s /etc/shadow shadow-link'
echo; echo "--- refused: a credential file (default policy)"
try 'cat .env'
try 'cp .env leaked.txt'
echo; echo "--- refused: a set-user-ID plant (BACKING is the host's; the mount's nosuid is not)"
try 'cp /usr/bin/id ./id && chmod 4755 ./id'
step "stat -c '%A %n' $ws/id   # no set-user-ID bit in the backing dir"
stat -c '%A %n' "$ws/id"
step "cat $ws/.env   # unchanged in the backing dir"
cat "$ws/.env"
step "cat $audit   # one JSON line per refusal"
cat "$audit"
step "realmfs journal list $mnt   # every change made through the mount, per owner (realmfs journal diff|undo)"
"$realmfs" journal list "$mnt"
step "fusermount3 -u $mnt"
fusermount3 -u "$mnt"
echo "demo done: the mount is gone and the workspace is as the demo left it."
