// Package audit is the mount's audit log: one JSON line per refusal (an
// Event), repeats within a window coalesced into one line with a count,
// the file rotated at a size bound and reopened on SIGHUP. It is a package
// of its own because nothing in it is about the node tree: fusefs hands it
// the refusal (op, path, code, errno, rule) and the request's context, and
// it writes the line; cmd/realmfs opens and reopens the file.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/internal/lockorder"
)

// Event is one audit line: why a process on the mount was refused.
type Event struct {
	Time time.Time `json:"time"`
	Op   string    `json:"op"`
	// Path is workspace-relative. A name that is not UTF-8 cannot be a JSON
	// string as it is, so such a path is written with each byte that is not
	// part of a UTF-8 sequence as \xNN and each backslash as \\, and
	// Escaped says so: two different names never give one line.
	Path    string       `json:"path"`
	Escaped bool         `json:"escaped,omitempty"`
	Code    errcode.Code `json:"code"`
	Errno   string       `json:"errno"`
	Pid     uint32       `json:"pid"`
	// Comm and Exe name the calling program: /proc/PID/comm (the calling
	// thread's name, the program's unless it names its threads) and the
	// target of /proc/PID/exe. They are read once, when a line is first
	// written, and are "" when the process is gone or cannot be read; a
	// repeat line carries the program of the window's first refusal.
	Comm  string `json:"comm"`
	Exe   string `json:"exe"`
	Uid   uint32 `json:"uid"`
	Owner string `json:"owner,omitempty"`
	// Container is the container id in Owner's cgroup path (containerOf),
	// which the session record of realmctl names as containerId.
	Container string `json:"container,omitempty"`
	// Rule is what the refusal matched: a credential glob with
	// RuleSource, where it was written, or a rule id (fusefs/admit's Rule*
	// constants).
	Rule       string `json:"rule,omitempty"`
	RuleSource string `json:"ruleSource,omitempty"`
	// Cause is the error behind a failure the caller saw as Errno (a
	// commit's ENOSPC behind its EIO, say).
	Cause string `json:"cause,omitempty"`
	// Holder, on a LOCK_CONFLICT line, is the lock owner that holds the
	// file's write lock (locks.Table): whom the refused caller waits for.
	// HolderPid is the process of the holder's open that took the lock, and
	// HolderComm and HolderExe that process's program as /proc says when
	// the line is written ("" if it is gone): the lock is the owner's,
	// and that process may have exited since, its descriptor passed on.
	Holder     string `json:"holder,omitempty"`
	HolderPid  uint32 `json:"holderPid,omitempty"`
	HolderComm string `json:"holderComm,omitempty"`
	HolderExe  string `json:"holderExe,omitempty"`
	// Repeat, on a line that stands for more than one refusal, is how
	// many: the same op, path, code, errno, rule and owner refused again
	// within the window (a second for Open's log: coalesceWindow) of the
	// line before it that had them. The line carries the last one's time
	// and pid.
	Repeat int `json:"repeat,omitempty"`

	read bool // Comm and Exe have been read
}

// rotateEvent is the first line of a fresh audit file after a rotation.
type rotateEvent struct {
	Time      time.Time `json:"time"`
	Op        string    `json:"op"`      // "rotate"
	Rotated   string    `json:"rotated"` // where the full file went
	Coalesced int       `json:"coalesced"`
	Dropped   int       `json:"dropped"`
}

const (
	// coalesceWindow is how long repeats of one refusal are counted into
	// one line: a loop of open(".env") writes two lines a window, not one
	// per open.
	coalesceWindow = time.Second
	// MaxSize is the size at which Open's file is rotated to FILE.1 (one
	// generation kept), so the log stays under twice this.
	MaxSize = 64 << 20
)

// Auditor writes one JSON line per refusal. Writes are serialised so lines
// never interleave; a failed write is counted and reported to Logf, never
// fatal to the request.
//
// Repeats are coalesced: the first refusal of a kind is written at once;
// the same refusal again within the window (same op, path, code, errno,
// rule, owner and program) is counted, and the count goes out as one line with "repeat"
// when a different refusal comes, when the window has passed (at the next
// refusal or at Tick, which Open's ticker calls), or at Close.
type Auditor struct {
	mu     lockorder.Mutex[lockorder.AuditorMu]
	w      io.Writer
	failed int
	now    func() time.Time
	window time.Duration

	last    Event // the kind of the latest line, and when its window began
	held    Event // the latest repeat not yet written
	repeats int   // how many repeats held stands for
	// coalesced is how many refusals went into repeat lines (beyond one
	// per line); dropped, lines lost to write errors: both since the last
	// rotation.
	coalesced, dropped int
	// refusals counts every refusal recorded since Open (repeats too), for
	// realmfs status.
	refusals atomic.Uint64

	// file, path, size, maxSize: set by Open, for rotation.
	file          *os.File
	path          string
	size, maxSize int64
	stop, done    chan struct{}

	// Owner names the lock owner of a caller, when the mount knows one.
	Owner func(pid uint32) string
	// proc is where process pid's comm and exe are read: "/proc".
	proc string
	// Logf, if set, hears of lines that could not be written: the first,
	// and every 1000th after it.
	Logf func(format string, args ...any)
}

// New writes events to w, coalescing repeats within window by the clock
// now (time.Now; a window of 0 coalesces nothing). It has no ticker and no size bound: repeats held at the end of
// a window go out with the next refusal, Tick or Close.
func New(w io.Writer, now func() time.Time, window time.Duration) *Auditor {
	return &Auditor{w: w, now: now, window: window, proc: "/proc"}
}

// Open appends to the audit file at path (made 0600 if absent),
// rotating it to path+".1" when it would grow past maxSize, and runs a
// ticker that writes held repeats once their window has passed. Close
// stops the ticker, writes what is held and closes the file.
func Open(path string, maxSize int64) (*Auditor, error) {
	return openLog(path, maxSize, time.Now, coalesceWindow, true)
}

// openLog is Open with the clock and window given, and the
// ticker optional (tests call Tick).
func openLog(path string, maxSize int64, now func() time.Time, window time.Duration, ticker bool) (*Auditor, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	a := New(f, now, window)
	a.file, a.path, a.size, a.maxSize = f, path, st.Size(), maxSize
	if ticker {
		a.stop, a.done = make(chan struct{}), make(chan struct{})
		go a.tick(a.window)
	}
	return a, nil
}

// tick calls Tick every interval until Close.
func (a *Auditor) tick(interval time.Duration) {
	defer close(a.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.Tick()
		}
	}
}

// Record writes the event for a refusal of op on path.
func (a *Auditor) Record(ctx context.Context, op, path string, code errcode.Code, errno syscall.Errno) {
	a.RecordCause(ctx, op, path, code, errno, nil)
}

// RecordRefusal is Record for a refusal, with the rule that made it: a
// credential glob and its source, or a rule id.
func (a *Auditor) RecordRefusal(ctx context.Context, op, path string, code errcode.Code, errno syscall.Errno, rule, source string) {
	a.event(ctx, op, path, code, errno, nil, rule, source)
}

// Holder is who holds the lock a LOCK_CONFLICT met: its owner, and the
// pid of the open that took it (0 unknown).
type Holder struct {
	Owner string
	Pid   uint32
}

// RecordConflict is RecordRefusal for a LOCK_CONFLICT: the line names the
// holder whose lock refused the caller, and its opener's program.
func (a *Auditor) RecordConflict(ctx context.Context, op, path string, errno syscall.Errno, rule string, holder Holder) {
	a.eventWith(ctx, op, path, errcode.LockConflict, errno, nil, rule, "", holder)
}

// RecordCause is Record for a failure with an underlying cause.
func (a *Auditor) RecordCause(ctx context.Context, op, path string, code errcode.Code, errno syscall.Errno, cause error) {
	a.event(ctx, op, path, code, errno, cause, "", "")
}

// event builds the line of one refusal or failure and records it. The
// calling program is read here only when the line is not a repeat of the
// latest one: a loop of refusals costs no /proc reads.
func (a *Auditor) event(ctx context.Context, op, path string, code errcode.Code, errno syscall.Errno, cause error, rule, source string) {
	a.eventWith(ctx, op, path, code, errno, cause, rule, source, Holder{})
}

// eventWith is event with the holder of a lock conflict.
func (a *Auditor) eventWith(ctx context.Context, op, path string, code errcode.Code, errno syscall.Errno, cause error, rule, source string, holder Holder) {
	c := callerOf(ctx)
	ev := Event{Op: op, Code: code, Errno: errnoName(errno), Pid: c.Pid, Uid: c.Uid, Rule: rule, RuleSource: source,
		Holder: holder.Owner, HolderPid: holder.Pid}
	if holder.Pid != 0 {
		ev.HolderComm, ev.HolderExe = readProgram(a.proc, holder.Pid)
	}
	ev.Path, ev.Escaped = escapePath(path)
	if cause != nil {
		var e syscall.Errno
		if errors.As(cause, &e) {
			ev.Cause = errnoName(e)
		} else {
			ev.Cause = cause.Error()
		}
	}
	if a.Owner != nil {
		ev.Owner = a.Owner(c.Pid)
		ev.Container = containerOf(ev.Owner)
	}
	if !a.repeating(ev) {
		ev.Comm, ev.Exe = readProgram(a.proc, ev.Pid)
		ev.read = true
	}
	a.record(ev)
}

// callerOf is the process that made the request ctx serves; pid 0 and
// uid 0 for a call that came from no request.
func callerOf(ctx context.Context) fuse.Caller {
	if c, ok := fuse.FromContext(ctx); ok && c != nil {
		return *c
	}
	return fuse.Caller{}
}

// repeating reports whether ev would be counted as a repeat if recorded
// now without reading its program: the same refusal by the same process
// within the window. It is a hint, taken before the program is read
// outside the lock; record decides.
func (a *Auditor) repeating(ev Event) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return sameKind(ev, a.last) && ev.Pid == a.last.Pid && a.now().Sub(a.last.Time) < a.window
}

// record writes ev, or counts it as a repeat of the latest line: the same
// refusal within the window by the same program (the same process, whose
// program was read for the line, or another one whose comm and exe are the
// line's). So `cat .env` then `cp .env x` are two lines, and a loop that
// runs one program many times is one.
func (a *Auditor) record(ev Event) {
	a.refusals.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	ev.Time = a.now().UTC()
	if !ev.read && ev.Pid != a.last.Pid { // a line came between repeating and here
		ev.Comm, ev.Exe = readProgram(a.proc, ev.Pid)
		ev.read = true
	}
	sameProgram := ev.Pid == a.last.Pid || (ev.Comm == a.last.Comm && ev.Exe == a.last.Exe)
	if sameKind(ev, a.last) && sameProgram && ev.Time.Sub(a.last.Time) < a.window {
		ev.Comm, ev.Exe = a.last.Comm, a.last.Exe
		a.held = ev
		a.repeats++
		return
	}
	if !ev.read {
		ev.Comm, ev.Exe = readProgram(a.proc, ev.Pid)
	}
	a.flushLocked()
	a.last = ev
	a.write(ev)
}

// sameKind reports whether two refusals are repeats of one another.
func sameKind(x, y Event) bool {
	return x.Op == y.Op && x.Path == y.Path && x.Escaped == y.Escaped && x.Code == y.Code &&
		x.Errno == y.Errno && x.Cause == y.Cause && x.Owner == y.Owner && x.Uid == y.Uid &&
		x.Rule == y.Rule && x.RuleSource == y.RuleSource && x.Holder == y.Holder
}

// readProgram reads the name and executable of process pid under proc:
// both "" for pid 0 (no caller) and when the process is gone or its exe
// may not be read (a daemon not running as root, a kernel thread).
func readProgram(proc string, pid uint32) (comm, exe string) {
	if pid == 0 {
		return "", ""
	}
	dir := proc + "/" + strconv.FormatUint(uint64(pid), 10)
	if b, err := os.ReadFile(dir + "/comm"); err == nil {
		comm = strings.TrimSuffix(string(b), "\n")
	}
	if target, err := os.Readlink(dir + "/exe"); err == nil {
		exe = target
	}
	return comm, exe
}

// containerOf returns the container id in a cgroup owner's path: the 64
// hex digits of its last segment that holds them, bare (cgroupfs:
// /docker/ID) or as RUNTIME-ID.scope (systemd: libpod-, docker-,
// cri-containerd-, crio-). "" when there is none (a person's shell,
// another owner mode).
func containerOf(owner string) string {
	path, ok := strings.CutPrefix(owner, "cgroup:")
	if !ok {
		return ""
	}
	segs := strings.Split(path, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		seg := strings.TrimSuffix(segs[i], ".scope")
		if j := strings.LastIndexByte(seg, '-'); j >= 0 {
			seg = seg[j+1:]
		}
		if isContainerID(seg) {
			return seg
		}
	}
	return ""
}

// isContainerID reports whether s is 64 lower-case hex digits, the id
// Podman, Docker and containerd give a container.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Tick writes held repeats whose window has passed. Open's ticker
// calls it; tests call it after moving their clock.
func (a *Auditor) Tick() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.repeats > 0 && a.now().Sub(a.last.Time) >= a.window {
		a.flushLocked()
		a.last = Event{}
	}
}

// Flush writes held repeats now.
func (a *Auditor) Flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flushLocked()
}

// flushLocked writes the held repeats as one line: a lone repeat as a line
// of its own, more as one line with their count.
func (a *Auditor) flushLocked() {
	if a.repeats == 0 {
		return
	}
	ev := a.held
	if a.repeats > 1 {
		ev.Repeat = a.repeats
		a.coalesced += a.repeats - 1
	}
	a.held, a.repeats = Event{}, 0
	a.write(ev)
}

// write writes one line (a.mu held), rotating the file first if the line
// would take it past its bound.
func (a *Auditor) write(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		return
	}
	line = append(line, '\n')
	if a.file != nil && a.maxSize > 0 && a.size > 0 && a.size+int64(len(line)) > a.maxSize {
		a.rotate()
	}
	n, err := a.w.Write(line)
	a.size += int64(n)
	if err != nil {
		a.failed++
		a.dropped++
		if a.Logf != nil && a.failed%1000 == 1 {
			a.Logf("audit log: %v (%d lines not written)", err, a.failed)
		}
	}
}

// rotate renames the full file to path.1 (replacing the generation before
// it) and starts a fresh file whose first line counts what was coalesced
// and dropped since the last rotation. If the fresh file cannot be made,
// lines go on to the old one, which the rename moved.
func (a *Auditor) rotate() {
	old := a.path + ".1"
	if err := os.Rename(a.path, old); err != nil {
		a.logf("audit log: rotate: %v", err)
		a.size = 0 // try again at the next bound, not at every line
		return
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		a.logf("audit log: rotate: %v (writing on to %s)", err, old)
		a.size = 0
		return
	}
	a.file.Close()
	a.file, a.w, a.size = f, f, 0
	hdr := rotateEvent{Time: a.now().UTC(), Op: "rotate", Rotated: old, Coalesced: a.coalesced, Dropped: a.dropped}
	a.coalesced, a.dropped = 0, 0
	a.write(hdr)
}

// Reopen opens Open's path anew and writes on there (SIGHUP, after
// logrotate moved the file away). Held repeats go to the old file first. If
// the path cannot be opened, lines go on to the old file.
func (a *Auditor) Reopen() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.file == nil {
		return nil
	}
	a.flushLocked()
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("reopen %s: %w", a.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("reopen %s: %w", a.path, err)
	}
	a.file.Close()
	a.file, a.w, a.size = f, f, st.Size()
	return nil
}

func (a *Auditor) logf(format string, args ...any) {
	if a.Logf != nil {
		a.Logf(format, args...)
	}
}

// Close writes held repeats, stops the ticker and closes Open's
// file.
func (a *Auditor) Close() error {
	if a.stop != nil {
		close(a.stop)
		<-a.done
		a.stop = nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flushLocked()
	if a.file == nil {
		return nil
	}
	err := a.file.Close()
	a.file = nil
	return err
}

// Failed is how many events could not be written.
func (a *Auditor) Failed() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed
}

// escapePath returns p as it goes into a JSON string: p itself when it is
// UTF-8; otherwise with backslashes doubled and every byte outside a UTF-8
// sequence written \xNN, and true.
func escapePath(p string) (string, bool) {
	if utf8.ValidString(p) {
		return p, false
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, p[i])
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(p[i : i+size])
		}
		i += size
	}
	return b.String(), true
}

func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "" // an event no process was refused (a killed writer's bytes)
	}
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return e.Error()
}
