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

func TestCounts(t *testing.T) {
	strace := `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 29.51    0.000085           2        34        13 openat
 23.26    0.000067           3        22           futex
------ ----------- ----------- --------- --------- ----------------
100.00    0.000288           1        56        13 total
`
	sys, err := parseStraceC(strings.NewReader(strace))
	if err != nil {
		t.Fatal(err)
	}
	if sys["openat"] != 34 || sys["futex"] != 22 || sys["total"] != 56 {
		t.Errorf("parseStraceC = %v", sys)
	}
	log := "time=x level=DEBUG msg=\"rx 12: LOOKUP n1 [\\\"f\\\"] 2b p1\"\n" +
		"rx 13: CREATE n1 {...}\n" +
		"tx 13:     OK, {...}\n" +
		"doBatchForget: rx 14 1/2: FORGET n5 {Nlookup=1}\n"
	req, err := countOpcodes(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if req["LOOKUP"] != 1 || req["CREATE"] != 1 || req["FORGET"] != 1 || len(req) != 3 {
		t.Errorf("countOpcodes = %v", req)
	}
	cpu, err := parseStatCPU([]byte("123 (realm fs) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 9 0"))
	if err != nil || cpu != 2.0 {
		t.Errorf("parseStatCPU = %v, %v; want 2 s", cpu, err)
	}
	if n := parseSwitches([]byte("Name:\trealmfs\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n")); n != 127 {
		t.Errorf("parseSwitches = %d, want 127", n)
	}
	counts := strings.Join([]string{
		"create realmfs files 10",
		"create realmfs cpu_s 0.02",
		"create realmfs sys:total 56",
		"create realmfs sys:openat 34",
		"create realmfs sys:futex 22",
		"create realmfs req:total 70",
		"create realmfs req:CREATE 10",
		"create native files 10",
		"create native sys:total 10",
		"create native sys:openat 10",
	}, "\n")
	sets, err := parseCounts(strings.NewReader(counts))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeCountSet(&out, sets[0])
	got := out.String()
	for _, want := range []string{
		"| CPU (ms) | 2.000 | — |",
		"| **FUSE requests** | 7.00 | — |",
		"| **system calls** | 5.60 | 1.00 |",
		"| **system calls, less the Go runtime's** | 3.40 | 1.00 |",
		"| sys openat | 3.40 | 1.00 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("count table lacks %q:\n%s", want, got)
		}
	}
}
