package e2e

// The model test's worker processes (model_test.go): each is this test
// binary started with modelWorkerEnv set. A worker holds descriptors in
// named slots and does one command at a time, answering each on one line
// before the test sends the next, so the order of every call on the mount
// is the test's, without sleeps. A worker is a session's first process
// (the test starts it with setsid: under lockowner=session one lock
// owner) or a child another worker started (fork), which inherits some of
// its parent's descriptors and so its session and owner.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// modelWorkerEnv makes this binary a model worker: "stdio" (commands on
	// stdin, answers on stdout) or "IN:OUT", two FIFOs.
	modelWorkerEnv = "REALM_MODEL_WORKER"
	// modelSlotsEnv names the descriptors a forked worker inherits, at
	// fds 3, 4, … in that order: "s1,s4".
	modelSlotsEnv = "REALM_MODEL_SLOTS"
)

// init runs a model worker before TestMain: the helper switch of
// helper_test.go is not this file's.
func init() {
	if how := os.Getenv(modelWorkerEnv); how != "" {
		os.Exit(modelWorker(how))
	}
}

// modelOpenFlags are the open modes the model drives.
var modelOpenFlags = map[string]int{
	"RDONLY": unix.O_RDONLY,
	"TRUNC":  unix.O_WRONLY | unix.O_TRUNC,
	"RDWR":   unix.O_RDWR,
	"APPEND": unix.O_WRONLY | unix.O_APPEND,
	"EXCL":   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL,
}

// modelWorker is a worker's main function.
func modelWorker(how string) int {
	// One OS thread does every call: the daemon reads the closing thread's
	// descriptor table and asks whether it belongs to the opener.
	runtime.LockOSThread()
	in, out := os.Stdin, os.Stdout
	if how != "stdio" {
		paths := strings.SplitN(how, ":", 2)
		var err error
		if in, err = os.Open(paths[0]); err == nil {
			out, err = os.OpenFile(paths[1], os.O_WRONLY, 0)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "model worker:", err)
			return 2
		}
	}
	w := &worker{slots: map[string]int{}}
	if s := os.Getenv(modelSlotsEnv); s != "" {
		for i, slot := range strings.Split(s, ",") {
			fd, err := unix.FcntlInt(uintptr(3+i), unix.F_DUPFD_CLOEXEC, 3)
			if err != nil {
				fmt.Fprintln(os.Stderr, "model worker: inherited fd:", err)
				return 2
			}
			unix.Close(3 + i)
			w.slots[slot] = fd
		}
	}
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0
		}
		answer := w.do(strings.Fields(line))
		if _, err := fmt.Fprintln(out, answer); err != nil {
			return 0
		}
	}
}

// worker is a worker's descriptors, by slot.
type worker struct {
	slots map[string]int
	kids  []*exec.Cmd
}

// errAnswer is "err ENAME".
func errAnswer(err error) string {
	if e := errnoOf(err); e != 0 {
		return "err " + errnoName(e)
	}
	return "err " + strconv.Quote(err.Error())
}

// do runs one command and returns its answer line:
//
//	open SLOT PATH MODE   ok | err E
//	dup SLOT NEW          ok
//	write SLOT DATA       ok N
//	pwrite SLOT OFF DATA  ok N
//	setfl SLOT BOOL       ok (fcntl F_SETFL: O_APPEND set or cleared)
//	trunc SLOT SIZE       ok (ftruncate)
//	read SLOT             ok "CONTENT" (pread from 0)
//	fsync SLOT, close SLOT
//	rename FROM TO
//	fork IN OUT SLOT...   ok PID: a child worker inheriting those slots
//	check PATH...         per path, tab-separated: SIZE STATSIZE "CONTENT"
//	                      (a fresh O_RDONLY open, read, fstat, close, stat) or err E
//	forget                closes every slot, errors ignored (after a daemon kill)
func (w *worker) do(args []string) string {
	if len(args) == 0 {
		return "err empty"
	}
	fd, haveSlot := -1, false
	if len(args) > 1 {
		fd, haveSlot = w.slots[args[1]]
	}
	needSlot := func() bool { return haveSlot }
	switch args[0] {
	case "open":
		nfd, err := unix.Open(args[2], modelOpenFlags[args[3]]|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return errAnswer(err)
		}
		w.slots[args[1]] = nfd
		return "ok"
	case "dup":
		if !needSlot() {
			return "err noslot"
		}
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return errAnswer(err)
		}
		w.slots[args[2]] = nfd
		return "ok"
	case "write":
		if !needSlot() {
			return "err noslot"
		}
		n, err := unix.Write(fd, []byte(args[2]))
		if err != nil {
			return errAnswer(err)
		}
		return fmt.Sprintf("ok %d", n)
	case "pwrite":
		if !needSlot() {
			return "err noslot"
		}
		off, _ := strconv.ParseInt(args[2], 10, 64)
		n, err := unix.Pwrite(fd, []byte(args[3]), off)
		if err != nil {
			return errAnswer(err)
		}
		return fmt.Sprintf("ok %d", n)
	case "setfl":
		if !needSlot() {
			return "err noslot"
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err == nil {
			fl &^= unix.O_APPEND
			if args[2] == "true" {
				fl |= unix.O_APPEND
			}
			_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
		}
		if err != nil {
			return errAnswer(err)
		}
		return "ok"
	case "trunc":
		if !needSlot() {
			return "err noslot"
		}
		size, _ := strconv.ParseInt(args[2], 10, 64)
		if err := unix.Ftruncate(fd, size); err != nil {
			return errAnswer(err)
		}
		return "ok"
	case "read":
		if !needSlot() {
			return "err noslot"
		}
		buf := make([]byte, 1<<16)
		n, err := unix.Pread(fd, buf, 0)
		if err != nil {
			return errAnswer(err)
		}
		return "ok " + strconv.Quote(string(buf[:n]))
	case "fsync":
		if !needSlot() {
			return "err noslot"
		}
		if err := unix.Fsync(fd); err != nil {
			return errAnswer(err)
		}
		return "ok"
	case "close":
		if !needSlot() {
			return "err noslot"
		}
		delete(w.slots, args[1])
		if err := unix.Close(fd); err != nil {
			return errAnswer(err)
		}
		return "ok"
	case "rename":
		if err := unix.Rename(args[1], args[2]); err != nil {
			return errAnswer(err)
		}
		return "ok"
	case "fork":
		return w.fork(args[1], args[2], args[3:])
	case "check":
		var out []string
		for _, p := range args[1:] {
			out = append(out, checkPath(p))
		}
		return strings.Join(out, "\t")
	case "forget":
		for slot, fd := range w.slots {
			unix.Close(fd)
			delete(w.slots, slot)
		}
		return "ok"
	}
	return "err unknown command " + strconv.Quote(args[0])
}

// fork starts a child worker, which talks through the FIFOs in and out and
// inherits the descriptors of slots. It is in this worker's session.
func (w *worker) fork(in, out string, slots []string) string {
	self, err := os.Executable()
	if err != nil {
		return errAnswer(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), modelWorkerEnv+"="+in+":"+out, modelSlotsEnv+"="+strings.Join(slots, ","))
	cmd.Stderr = os.Stderr
	for _, s := range slots {
		fd, ok := w.slots[s]
		if !ok {
			return "err noslot"
		}
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return errAnswer(err)
		}
		f := os.NewFile(uintptr(dup), s)
		defer f.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	if err := cmd.Start(); err != nil {
		return errAnswer(err)
	}
	w.kids = append(w.kids, cmd)
	go cmd.Wait() // reap it when it dies
	return fmt.Sprintf("ok %d", cmd.Process.Pid)
}

// checkPath opens p read-only afresh and reports what this process sees.
func checkPath(p string) string {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errAnswer(err)
	}
	buf := make([]byte, 1<<16)
	n, rerr := unix.Pread(fd, buf, 0)
	var st unix.Stat_t
	ferr := unix.Fstat(fd, &st)
	cerr := unix.Close(fd)
	var lst unix.Stat_t
	serr := unix.Stat(p, &lst)
	for i, err := range []error{rerr, ferr, cerr, serr} {
		if err != nil {
			return []string{"read", "fstat", "close", "stat"}[i] + " " + errAnswer(err)
		}
	}
	return fmt.Sprintf("%d %d %s", st.Size, lst.Size, strconv.Quote(string(buf[:n])))
}
