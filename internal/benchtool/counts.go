package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Counting: what a workload costs per file, in numbers a loaded machine
// does not blur. For a FUSE target the daemon's requests by opcode (from
// its --debug log), its system calls by name (strace -c) and its CPU time
// (/proc/PID/stat); for a native target the workload's own system calls and
// CPU. bench.sh records them as "workload target metric value" lines and
// counttable divides them by the files the workload made.

// createSafe makes n files of sz bytes under dir as a careful program
// does without a file system that does it for it: each through a temp
// sibling, written, fsynced, renamed over the name, and the directory
// fsynced: what realmfs does for every created file.
func createSafe(dir string, n int, sz int64) error {
	data := make([]byte, sz)
	for i := range data {
		data[i] = byte(i)
	}
	for i := range n {
		p := smallPath(dir, i)
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
		}
		tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// processCPU is the user plus system CPU time, in seconds, that process pid
// (all its threads, live and exited) has used: fields 14 and 15 of
// /proc/PID/stat, in clock ticks.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// processSwitches is how many times the live threads of process pid have
// been switched off a CPU (voluntary_ctxt_switches plus
// nonvoluntary_ctxt_switches of each /proc/PID/task/TID/status). On a
// paravirtualized machine each costs the daemon more than most of its system
// calls: it is the number that follows FUSE round trips, blocking calls and
// the Go runtime's own wake-ups. Threads that exited are not counted.
func processSwitches(pid int) (int64, error) {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/status")
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: no tasks (%v)", pid, err)
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		total += parseSwitches(b)
	}
	return total, nil
}

// parseSwitches sums the two context-switch counts of a status file.
func parseSwitches(b []byte) int64 {
	var n int64
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
			x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			n += x
		}
	}
	return n
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicks = 100

// parseStatCPU reads utime and stime from a /proc/PID/stat line. The
// command name (field 2) is in parentheses and may hold spaces, so fields
// are counted from its closing parenthesis.
func parseStatCPU(b []byte) (float64, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, errors.New("stat: too few fields")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("stat: %w", err)
	}
	return float64(ut+st) / clockTicks, nil
}

// cpuRun runs a command and prints the CPU seconds it and its children
// used, user plus system, on stdout (the command's own stdout is
// discarded).
func cpuRun(args []string) (float64, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, err
	}
	return (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), nil
}

// rxLine matches the request lines of go-fuse's debug log ("rx 12: LOOKUP
// n1 ..." and the batch forget's "rx 12 3/9: FORGET ..."), wherever the
// log's own format puts them in the line.
var rxLine = regexp.MustCompile(`\brx [0-9]+(?: [0-9]+/[0-9]+)?: ([A-Z_0-9]+)\b`)

// countOpcodes counts the FUSE requests of each opcode in a go-fuse debug
// log.
func countOpcodes(r io.Reader) (map[string]int, error) {
	counts := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m := rxLine.FindSubmatch(sc.Bytes()); m != nil {
			counts[string(m[1])]++
		}
	}
	return counts, sc.Err()
}

// parseStraceC reads the table strace -c writes: per system call, its
// number of calls. The "total" row is kept as "total".
func parseStraceC(r io.Reader) (map[string]int, error) {
	counts := map[string]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		if _, err := strconv.ParseFloat(f[0], 64); err != nil {
			continue // the header and the rules
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("strace -c line %q: %w", sc.Text(), err)
		}
		counts[f[len(f)-1]] += n
	}
	return counts, sc.Err()
}

// printCounts prints counts as "PREFIX:NAME N" lines, sorted by name, for
// bench.sh to prefix with the workload and target.
func printCounts(w io.Writer, prefix string, counts map[string]int) {
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(w, "%s:%s %d\n", prefix, k, counts[k])
	}
}

// countSet is one workload's counts: per target, per metric, the value.
type countSet struct {
	workload string
	targets  []string
	files    map[string]float64 // per target: files the workload made
	values   map[string]map[string]float64
	metrics  []string
}

// parseCounts reads "workload target metric value" lines.
func parseCounts(r io.Reader) ([]*countSet, error) {
	var sets []*countSet
	byName := map[string]*countSet{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue
		}
		v, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", sc.Text(), err)
		}
		s := byName[f[0]]
		if s == nil {
			s = &countSet{workload: f[0], files: map[string]float64{}, values: map[string]map[string]float64{}}
			byName[f[0]] = s
			sets = append(sets, s)
		}
		if !slices.Contains(s.targets, f[1]) {
			s.targets = append(s.targets, f[1])
			s.values[f[1]] = map[string]float64{}
		}
		if f[2] == "files" {
			s.files[f[1]] = v
			continue
		}
		if !slices.Contains(s.metrics, f[2]) {
			s.metrics = append(s.metrics, f[2])
		}
		s.values[f[1]][f[2]] += v
	}
	return sets, sc.Err()
}

// metricOrder sorts the rows of a count table: CPU first, then requests,
// then system calls; within requests and system calls the total first,
// then by the largest count over the targets.
func (s *countSet) metricOrder() []string {
	rank := func(m string) int {
		switch {
		case m == "cpu_s", m == "ctxsw":
			return 0
		case m == "req:total":
			return 1
		case strings.HasPrefix(m, "req:"):
			return 2
		case m == "sys:total":
			return 3
		case strings.HasPrefix(m, "sys:"):
			return 4
		}
		return 5
	}
	most := func(m string) float64 {
		var x float64
		for _, t := range s.targets {
			x = max(x, s.perFile(t, m))
		}
		return x
	}
	out := slices.Clone(s.metrics)
	slices.SortStableFunc(out, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		ma, mb := most(a), most(b)
		switch {
		case ma > mb:
			return -1
		case ma < mb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

func (s *countSet) perFile(target, metric string) float64 {
	n := s.files[target]
	if n <= 0 {
		return 0
	}
	return s.values[target][metric] / n
}

// countTable prints, per workload, a Markdown table of every metric per
// file made, one column per target. System calls that no target makes at
// least minPerFile times per file are summed into one "other" row, so the
// table stays readable.
func countTable(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sets, err := parseCounts(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range sets {
		writeCountSet(w, s)
	}
	return nil
}

// runtimeCalls are the system calls the Go runtime makes for itself
// (scheduling, signals for preemption, memory), which a tracer's slowing of
// the daemon multiplies; the row without them compares what the file
// system's own code asks of the kernel.
var runtimeCalls = []string{"futex", "nanosleep", "sched_yield", "epoll_pwait", "epoll_wait",
	"getpid", "gettid", "tgkill", "rt_sigreturn", "rt_sigprocmask", "sigaltstack",
	"madvise", "mmap", "munmap", "mprotect", "clone", "clone3", "restart_syscall", "set_robust_list", "rseq"}

// withoutRuntime is the system calls per file of target, less runtimeCalls.
func (s *countSet) withoutRuntime(target string) (float64, bool) {
	total, ok := s.values[target]["sys:total"]
	if !ok {
		return 0, false
	}
	for _, c := range runtimeCalls {
		total -= s.values[target]["sys:"+c]
	}
	if n := s.files[target]; n > 0 {
		return total / n, true
	}
	return 0, false
}

// minPerFile is the least count per file a system call or request needs,
// on some target, for a row of its own.
const minPerFile = 0.05

func writeCountSet(w io.Writer, s *countSet) {
	fmt.Fprintf(w, "\n%s, per file (made, saved or removed):\n\n", s.workload)
	header, rule := "| per file |", "|---|"
	for _, t := range s.targets {
		header += " " + t + " |"
		rule += "---:|"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, rule)
	other := map[string]map[string]float64{"req:": {}, "sys:": {}}
	for _, m := range s.metricOrder() {
		prefix, _, _ := strings.Cut(m, ":")
		prefix += ":"
		small := true
		for _, t := range s.targets {
			small = small && s.perFile(t, m) < minPerFile
		}
		if small && other[prefix] != nil && !strings.HasSuffix(m, ":total") {
			for _, t := range s.targets {
				other[prefix][t] += s.perFile(t, m)
			}
			continue
		}
		row := "| " + metricLabel(m) + " |"
		for _, t := range s.targets {
			if _, ok := s.values[t][m]; !ok {
				row += " — |"
				continue
			}
			row += " " + formatPerFile(m, s.perFile(t, m)) + " |"
		}
		fmt.Fprintln(w, row)
		if m == "sys:total" {
			row := "| **system calls, less the Go runtime's** |"
			for _, t := range s.targets {
				if v, ok := s.withoutRuntime(t); ok {
					row += " " + formatPerFile("", v) + " |"
				} else {
					row += " — |"
				}
			}
			fmt.Fprintln(w, row)
		}
	}
	for _, prefix := range []string{"req:", "sys:"} {
		if len(other[prefix]) == 0 {
			continue
		}
		row := "| " + metricLabel(prefix+"other") + " |"
		for _, t := range s.targets {
			row += " " + formatPerFile("", other[prefix][t]) + " |"
		}
		fmt.Fprintln(w, row)
	}
	files := ""
	for _, t := range s.targets {
		files += fmt.Sprintf(" %s %.0f,", t, s.files[t])
	}
	fmt.Fprintf(w, "\nFiles:%s. CPU and system calls are the daemon's on a FUSE target, the workload's own on a native one.\n", strings.TrimSuffix(files, ","))
}

func metricLabel(m string) string {
	switch {
	case m == "cpu_s":
		return "CPU (ms)"
	case m == "ctxsw":
		return "context switches of the daemon"
	case m == "req:total":
		return "**FUSE requests**"
	case m == "sys:total":
		return "**system calls**"
	case strings.HasPrefix(m, "req:"):
		return "req " + strings.TrimPrefix(m, "req:")
	case strings.HasPrefix(m, "sys:"):
		return "sys " + strings.TrimPrefix(m, "sys:")
	}
	return m
}

func formatPerFile(metric string, v float64) string {
	if metric == "cpu_s" {
		return fmt.Sprintf("%.3f", v*1000)
	}
	return fmt.Sprintf("%.2f", v)
}

// waitFor polls until path holds pattern (a daemon's log saying it is
// ready, strace saying it attached), at most timeout.
func waitFor(path, pattern string, timeout time.Duration) error {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if b, err := os.ReadFile(path); err == nil && re.Match(b) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %q after %v", path, pattern, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// printCountsOf prints the request counts of a debug log (opcodes) or the
// system call counts of an strace -c summary (stracec) in file.
func printCountsOf(kind, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	parse, prefix := countOpcodes, "req"
	if kind == "stracec" {
		parse, prefix = parseStraceC, "sys"
	}
	counts, err := parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if prefix == "req" {
		total := 0
		for _, n := range counts {
			total += n
		}
		counts["total"] = total
	}
	printCounts(os.Stdout, prefix, counts)
	return nil
}
