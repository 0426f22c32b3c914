package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReportPairsByRound(t *testing.T) {
	results := strings.Join([]string{
		"stat native 1.0 1",
		"stat realmfs 2.0 1",
		"stat realmfs_guard=off 1.0 1",
		"stat native 1.0 2",
		"stat realmfs 6.0 2", // a slow spell hits both mounts of round 2
		"stat realmfs_guard=off 4.0 2",
		"stat native 1.0 3",
		"stat realmfs 3.0 3",
		"stat realmfs_guard=off 2.0 3",
		"untar native FAIL 1",
		"untar realmfs 1.0 1",
	}, "\n")
	m, err := parseResults(strings.NewReader(results))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeTable(&out, m)
	writePair(&out, m, "realmfs", "realmfs_guard=off")
	got := out.String()
	for _, want := range []string{
		"| stat | 1.000 | 3.000 | 3.00× | 2.000 | 2.00× |",
		"| untar | FAILED (1) | 1.000 | — |",
		// Per-round ratios 2, 1.5, 1.5: the median is 1.5, not 3/2 of medians by luck.
		"| stat | 3.000 | 2.000 | 1.500× | 1.500× | 2.000× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

func TestParseResultsRejectsBadNumbers(t *testing.T) {
	for _, line := range []string{"stat native x 1", "stat native 1.0 r"} {
		if _, err := parseResults(strings.NewReader(line)); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}
