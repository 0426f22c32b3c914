#!/usr/bin/env bash
# together.sh TARGET... runs make targets at the same time, each into its
# own log (.cache/together/TARGET.log), and prints each log whole, in the
# order given, once all have ended: make test runs the unit tests, the
# lock-order tests and the install checks this way, since each leaves
# much of the machine idle while its tests wait on processes and timeouts
# (on the 2-vCPU machine 88 + 30 + 25 s one after another, using 63 %,
# 79 % and 42 % of its CPUs). It fails if any target failed, naming it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
dir=.cache/together
mkdir -p "$dir"
declare -A pid
for t in "$@"; do
	(
		make --no-print-directory "$t" >"$dir/$t.log" 2>&1
		rc=$?
		echo "$SECONDS" >"$dir/$t.took"
		exit "$rc"
	) &
	pid[$t]=$!
done
declare -A rc
for t in "$@"; do
	wait "${pid[$t]}"
	rc[$t]=$?
done
failed=()
for t in "$@"; do
	echo "==> make $t (rc ${rc[$t]}, $(cat "$dir/$t.took") s, beside: $*)"
	cat "$dir/$t.log"
	((rc[$t] == 0)) || failed+=("$t")
done
if ((${#failed[@]} > 0)); then
	echo "together: failed: ${failed[*]} (logs in $dir)" >&2
	exit 1
fi
