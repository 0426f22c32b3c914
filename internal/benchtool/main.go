// Command benchtool runs the file-system workloads of scripts/bench.sh
// in-process, so that what is measured is the file system and not fork/exec,
// and turns the measurements into the Markdown table bench.sh prints.
//
// Every workload command prints one line: the elapsed seconds.
//
//	benchtool create DIR N SIZE   N files of SIZE bytes in nested dirs under DIR
//	benchtool stat DIR N          lstat the N files made by create
//	benchtool read DIR N          open, read whole, close the N files
//	benchtool write FILE SIZE     write SIZE bytes sequentially (1 MiB writes), fsync, close
//	benchtool readfile FILE       read FILE sequentially (1 MiB reads)
//	benchtool atomic DIR N        N atomic saves of a 4 KiB document: temp, write, fsync, rename
//	benchtool createsafe DIR N SIZE  create's files, each as a careful program makes it:
//	                              temp, write, fsync, rename, fsync the directory
//	benchtool createpar DIR N SIZE P  create's N files by P processes at once, each
//	                              N/P of them under DIR/pI (make -j, parallel agents)
//	benchtool run -- CMD ARGS...  run a program (stdout discarded), fail if it fails
//	benchtool dropcaches          sync, then drop page, dentry and inode caches (root)
//	benchtool report FILE [A/B...] medians and ratios of FILE's "workload target seconds [round]"
//	                              lines; each A/B adds a table of A's time over B's, paired by round
//
// and for the counts (counts.go), each printing what it says:
//
//	benchtool cpu PID             CPU seconds (user+system) process PID has used
//	benchtool ctxsw PID           context switches of process PID's live threads
//	benchtool cpurun -- CMD ARGS... run a program, print the CPU seconds it used
//	benchtool opcodes LOG         "req:OPCODE N" per FUSE opcode in a go-fuse debug log
//	benchtool stracec FILE        "sys:NAME N" per system call of an strace -c summary
//	benchtool waitfor FILE REGEXP wait (at most 60 s) until FILE matches REGEXP
//	benchtool counttable FILE     per-file tables of FILE's "workload target metric value" lines
//
// SIZE takes a K, M or G suffix (powers of 1024).
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	args := os.Args[2:]
	start := time.Now()
	timed := true
	switch os.Args[1] {
	case "create":
		need(args, 3)
		err = create(args[0], atoi(args[1]), size(args[2]))
	case "stat":
		need(args, 2)
		err = statAll(args[0], atoi(args[1]))
	case "read":
		need(args, 2)
		err = readAll(args[0], atoi(args[1]))
	case "write":
		need(args, 2)
		err = writeSeq(args[0], size(args[1]))
	case "readfile":
		need(args, 1)
		err = readSeq(args[0])
	case "atomic":
		need(args, 2)
		err = atomicSaves(args[0], atoi(args[1]))
	case "createsafe":
		need(args, 3)
		err = createSafe(args[0], atoi(args[1]), size(args[2]))
	case "createpar":
		need(args, 4)
		err = createPar(args[0], atoi(args[1]), args[2], atoi(args[3]))
	case "cpu":
		timed = false
		need(args, 1)
		var s float64
		if s, err = processCPU(atoi(args[0])); err == nil {
			fmt.Printf("%.2f\n", s)
		}
	case "ctxsw":
		timed = false
		need(args, 1)
		var n int64
		if n, err = processSwitches(atoi(args[0])); err == nil {
			fmt.Println(n)
		}
	case "cpurun":
		timed = false
		if len(args) < 2 || args[0] != "--" {
			usage()
		}
		var s float64
		if s, err = cpuRun(args[1:]); err == nil {
			fmt.Printf("%.3f\n", s)
		}
	case "opcodes", "stracec":
		timed = false
		need(args, 1)
		err = printCountsOf(os.Args[1], args[0])
	case "waitfor":
		timed = false
		need(args, 2)
		err = waitFor(args[0], args[1], time.Minute)
	case "counttable":
		timed = false
		need(args, 1)
		err = countTable(args[0], os.Stdout)
	case "run":
		if len(args) < 2 || args[0] != "--" {
			usage()
		}
		cmd := exec.Command(args[1], args[2:]...)
		cmd.Stderr = os.Stderr
		err = cmd.Run()
	case "dropcaches":
		timed = false
		err = dropCaches()
	case "report":
		timed = false
		if len(args) < 1 {
			usage()
		}
		err = report(args[0], args[1:], os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(1)
	}
	if timed {
		fmt.Printf("%.6f\n", time.Since(start).Seconds())
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchtool create|createsafe|stat|read|write|readfile|atomic|run|dropcaches|report|cpu|ctxsw|cpurun|opcodes|stracec|waitfor|counttable ARGS (see the package doc)")
	os.Exit(2)
}

func need(args []string, n int) {
	if len(args) != n {
		usage()
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		fmt.Fprintf(os.Stderr, "benchtool: bad count %q\n", s)
		os.Exit(2)
	}
	return n
}

// size parses 4096, 4K, 64M, 1G.
func size(s string) int64 {
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		fmt.Fprintf(os.Stderr, "benchtool: bad size %q\n", s)
		os.Exit(2)
	}
	return n * mult
}

// smallPath is the i-th small file: 100 files per leaf dir, 10 leaves per
// middle dir.
func smallPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("m%03d", i/1000), fmt.Sprintf("l%02d", i/100%10), fmt.Sprintf("f%05d", i))
}

// createPar runs p processes of benchtool create at once, the i-th making
// n/p files (the first n%p one more) under dir/pI: processes, not
// goroutines, so that each has a descriptor table of its own, as the
// writers of a parallel build do.
func createPar(dir string, n int, sz string, p int) error {
	if p < 1 {
		return fmt.Errorf("createpar: %d processes", p)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmds := make([]*exec.Cmd, p)
	for i := range cmds {
		k := n / p
		if i < n%p {
			k++
		}
		cmds[i] = exec.Command(self, "create", filepath.Join(dir, "p"+strconv.Itoa(i)), strconv.Itoa(k), sz)
		cmds[i].Stderr = os.Stderr
		if err := cmds[i].Start(); err != nil {
			for _, c := range cmds[:i] { // none left running behind the error
				c.Process.Kill()
				c.Wait()
			}
			return err
		}
	}
	var errs []error
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("createpar: process %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func create(dir string, n int, sz int64) error {
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
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func statAll(dir string, n int) error {
	var st unix.Stat_t
	for i := range n {
		if err := unix.Lstat(smallPath(dir, i), &st); err != nil {
			return err
		}
	}
	return nil
}

func readAll(dir string, n int) error {
	buf := make([]byte, 64<<10)
	for i := range n {
		f, err := os.Open(smallPath(dir, i))
		if err != nil {
			return err
		}
		for {
			_, err := f.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return err
			}
		}
		f.Close()
	}
	return nil
}

func writeSeq(path string, total int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	for written := int64(0); written < total; {
		chunk := buf[:min(int64(len(buf)), total-written)]
		n, err := f.Write(chunk)
		if err != nil {
			f.Close()
			return err
		}
		written += int64(n)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readSeq(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// atomicSaves is what editors and tools do on save: write a temp sibling,
// fsync it, rename it over the document.
func atomicSaves(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	doc := filepath.Join(dir, "document.txt")
	data := make([]byte, 4096)
	for i := range n {
		copy(data, fmt.Sprintf("save %d\n", i))
		tmp := filepath.Join(dir, fmt.Sprintf(".document.txt.%d.tmp", i))
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
		if err := os.Rename(tmp, doc); err != nil {
			return err
		}
	}
	return nil
}

func dropCaches() error {
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200)
}

// report reads "workload target seconds" lines and prints, per workload in
// order of first appearance, the median per target and its ratio to the
// native median, as a Markdown table. Targets are columns in order of first
// appearance; the first target is the reference ("native").
func report(path string, pairs []string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := parseResults(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(m.targets) == 0 {
		return errors.New("no measurements")
	}
	writeTable(w, m)
	for _, p := range pairs {
		a, b, ok := strings.Cut(p, "/")
		if !ok || !slices.Contains(m.targets, a) || !slices.Contains(m.targets, b) {
			return fmt.Errorf("pair %q: want A/B, two targets of %s", p, path)
		}
		writePair(w, m, a, b)
	}
	return nil
}

// measurements are the parsed lines of a results file.
type measurements struct {
	workloads, targets []string          // in order of first appearance
	samples            map[key][]float64 // every sample of a workload on a target
	byRound            map[key]map[int]float64
	failed             map[key]int
}

type key struct{ workload, target string }

// parseResults reads "workload target seconds [round]" lines; seconds may be
// FAIL.
func parseResults(r io.Reader) (*measurements, error) {
	m := &measurements{samples: map[key][]float64{}, byRound: map[key]map[int]float64{}, failed: map[key]int{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 && len(fields) != 4 {
			continue
		}
		if !slices.Contains(m.workloads, fields[0]) {
			m.workloads = append(m.workloads, fields[0])
		}
		if !slices.Contains(m.targets, fields[1]) {
			m.targets = append(m.targets, fields[1])
		}
		k := key{fields[0], fields[1]}
		if fields[2] == "FAIL" {
			m.failed[k]++
			continue
		}
		v, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", sc.Text(), err)
		}
		m.samples[k] = append(m.samples[k], v)
		if len(fields) == 4 {
			round, err := strconv.Atoi(fields[3])
			if err != nil {
				return nil, fmt.Errorf("%q: round: %w", sc.Text(), err)
			}
			if m.byRound[k] == nil {
				m.byRound[k] = map[int]float64{}
			}
			m.byRound[k][round] = v
		}
	}
	return m, sc.Err()
}

// writeTable prints every target's median per workload and its ratio to the
// first target (native).
func writeTable(w io.Writer, m *measurements) {
	header := "| workload | " + m.targets[0] + " (s) |"
	rule := "|---|---:|"
	for _, t := range m.targets[1:] {
		header += " " + t + " (s) | ratio |"
		rule += "---:|---:|"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, rule)
	anyFailed := false
	for _, wl := range m.workloads {
		k0 := key{wl, m.targets[0]}
		ref, haveRef := median(m.samples[k0])
		haveRef = haveRef && m.failed[k0] == 0
		row := "| " + wl + " | " + cell(ref, haveRef, m.failed[k0]) + " |"
		for _, t := range m.targets[1:] {
			k := key{wl, t}
			v, ok := median(m.samples[k])
			ok = ok && m.failed[k] == 0
			ratio := "—"
			if ok && haveRef && ref > 0 {
				ratio = fmt.Sprintf("%.2f×", v/ref)
			}
			row += " " + cell(v, ok, m.failed[k]) + " | " + ratio + " |"
		}
		fmt.Fprintln(w, row)
	}
	for _, n := range m.failed {
		anyFailed = anyFailed || n > 0
	}
	n := 0
	for _, s := range m.samples {
		n = max(n, len(s))
	}
	fmt.Fprintf(w, "\nMedians of %d round(s); ratio = target median / %s median (lower is better).\n", n, m.targets[0])
	if anyFailed {
		fmt.Fprintln(w, "FAILED (n): the workload failed in n rounds on that target (its errors are on bench.sh's stderr); no median is given.")
	}
}

// writePair prints a's time over b's for every workload measured on both,
// paired by round: each round's ratio compares two runs made back to back,
// so a slow spell of the machine cancels out, which a ratio of medians does
// not do.
func writePair(w io.Writer, m *measurements, a, b string) {
	fmt.Fprintf(w, "\n%s / %s, paired by round:\n\n", a, b)
	fmt.Fprintf(w, "| workload | %s (s) | %s (s) | median ratio | lowest | highest |\n", a, b)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, wl := range m.workloads {
		ka, kb := key{wl, a}, key{wl, b}
		var ratios []float64
		for round, va := range m.byRound[ka] {
			if vb, ok := m.byRound[kb][round]; ok && vb > 0 {
				ratios = append(ratios, va/vb)
			}
		}
		if len(ratios) == 0 {
			continue
		}
		ma, _ := median(m.samples[ka])
		mb, _ := median(m.samples[kb])
		r, _ := median(ratios)
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f× | %.3f× | %.3f× |\n", wl, ma, mb, r, slices.Min(ratios), slices.Max(ratios))
	}
}

func cell(v float64, ok bool, failed int) string {
	switch {
	case failed > 0:
		return fmt.Sprintf("FAILED (%d)", failed)
	case !ok:
		return "—"
	}
	return fmt.Sprintf("%.3f", v)
}

func median(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}
