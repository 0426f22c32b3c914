#!/usr/bin/env bash
# run-e2e.sh [go test flags] runs the end-to-end suite: real realmfs mounts, real programs,
# and the realmctl tests against a real podman service that it starts here
# (scripts/podman-setup.sh) and stops on exit. The daemon under test is
# built with the race detector (REALM_E2E_RACE=1; set it to 0 to skip) and
# the lock order checker (REALM_E2E_LOCKDEP=1, the tag lockdep: about 8% on
# the suite's time), and a race or a lock taken out of order that it
# reports fails the test whose mount it served.
set -euo pipefail
cd "$(dirname "$0")/.."
export REALM_E2E_RACE=${REALM_E2E_RACE:-1}
export REALM_E2E_LOCKDEP=${REALM_E2E_LOCKDEP:-1}
# The randomized tests' budgets in make test (make soak runs them longer):
# TestModel 4 sequences of 400 steps, fsx 5,000 operations, the symlink
# adversary 15,000, TestManyFilesRoundTrip 2,000 files a mount. A failure
# prints its seed either way.
export REALM_MODEL_SEQS=${REALM_MODEL_SEQS:-4}
export REALM_MANY_FILES=${REALM_MANY_FILES:-2000}
export REALM_FSX_OPS=${REALM_FSX_OPS:-5000}
export REALM_ADVERSARY_OPS=${REALM_ADVERSARY_OPS:-15000}
eval "$(bash scripts/podman-setup.sh)"
trap 'bash scripts/podman-setup.sh stop' EXIT
go test -count=1 -timeout 40m -v "$@" ./e2e/ 2>&1 | tee .e2e.log | grep -vE '^\s+(=== (PAUSE|CONT))' || true
# go test's own verdict, from its closing lines.
if grep -qE '^(FAIL|--- FAIL|panic:)' .e2e.log || ! grep -qE '^ok\s' .e2e.log; then
	echo "run-e2e: the end-to-end suite failed" >&2
	exit 1
fi
