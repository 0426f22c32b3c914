#!/usr/bin/env bash
# fuzz.sh runs every fuzz target (each `func FuzzX(f *testing.F)` in a
# package's _test.go files) for a short budget (default 100000 executions
# each) on top of the committed seed corpora, which plain `go test` already
# replays. The budget is a count, not a duration: Go 1.26's fuzz coordinator
# can report a bare "context deadline exceeded" failure at the end of a
# -fuzztime duration with no failing input (golang/go#75804, fixed in Go
# 1.27); a count has no deadline to race.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-100000x}
go list -f '{{.ImportPath}} {{.Dir}}' ./... | grep -v '/e2e ' | while read -r pkg dir; do
	{ grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null || true; } | sed 's/^func //' | sort -u |
		while read -r f; do
			echo "fuzz: $pkg $f ($t)"
			go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg" </dev/null
		done
done
