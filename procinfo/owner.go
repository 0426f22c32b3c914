package procinfo

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/internal/lockorder"
)

// OwnerMode chooses what makes two callers one owner.
type OwnerMode int

const (
	// OwnerCgroup makes each cgroup one owner: all processes of one agent
	// sandbox, container or login session share a lock, and a person's shell
	// is another owner. The default.
	OwnerCgroup OwnerMode = iota
	// OwnerSession makes each Unix session (setsid(2)) one owner.
	OwnerSession
	// OwnerPID makes each process one owner.
	OwnerPID
)

// String returns the mode's name as ParseOwnerMode accepts it.
func (m OwnerMode) String() string {
	switch m {
	case OwnerCgroup:
		return "cgroup"
	case OwnerSession:
		return "session"
	case OwnerPID:
		return "pid"
	default:
		return "OwnerMode(" + strconv.Itoa(int(m)) + ")"
	}
}

// ParseOwnerMode parses "cgroup", "session" or "pid" (the lockowner mount
// option).
func ParseOwnerMode(s string) (OwnerMode, error) {
	switch s {
	case "cgroup":
		return OwnerCgroup, nil
	case "session":
		return OwnerSession, nil
	case "pid":
		return OwnerPID, nil
	}
	return 0, fmt.Errorf("procinfo: unknown lock owner mode %q (want cgroup, session or pid)", s)
}

// KernelOwner is the owner of requests with pid 0, which the kernel makes on
// its own behalf (writeback, for example) and which no process can be blamed
// for.
const KernelOwner Owner = "kernel"

// DefaultCacheSize bounds each of a Resolver's caches. An entry of the pidfd
// cache holds a file descriptor, and the daemon's descriptors also hold
// every directory the kernel has cached, hence the modest bound: the
// threads that use a mount at any one time are far fewer, and a miss costs
// only ~17 µs.
const DefaultCacheSize = 256

// Resolver maps the pid of a FUSE request to its Owner. It is safe for
// concurrent use. Close releases its file descriptors.
//
// The owner of a process is fixed the first time it is resolved while the
// process lives: a later setsid(2) or move to another cgroup does not change
// it. The result is cached per pid together with a pidfd (pidfd_open(2)) of
// the process; a lookup that hits polls the pidfd, one system call, and
// trusts the cached owner only while the process has not exited, since
// until then its pid cannot be reused. The kernel names the calling thread,
// so the pidfd is of that thread (PIDFD_THREAD, Linux 6.9).
//
// Without pidfds (an older kernel, a thread before Linux 6.9, a procRoot
// other than "/proc") a lookup reads /proc/PID/stat instead, whose start time
// tells a reused pid apart, and caches by pid and start time in cgroup and
// pid modes; session mode then reads the session on every call.
type Resolver struct {
	mode     OwnerMode
	procRoot string
	max      int // bound of each cache; a field so tests can shrink it

	// pidfd is how far pidfds work here; pidfdNone for a procRoot other
	// than "/proc", whose processes pidfd_open cannot see.
	pidfd pidfdSupport
	// fdMu guards the descriptors in live: they are polled under RLock and
	// closed only under Lock, so a poll never meets a closed and reused fd.
	fdMu   lockorder.RWMutex[lockorder.ResolverFdMu]
	live   map[uint32]*liveProc // guarded by fdMu
	closed bool                 // guarded by fdMu
	// misses counts lookups that opened a pidfd and read /proc; tests read
	// it to tell a hit from a miss.
	misses atomic.Uint64
	// afterRead, if set, runs between a miss's read of /proc and its poll
	// of the pidfd; tests use it to kill the process in between.
	afterRead func(pid uint32)

	mu    lockorder.Mutex[lockorder.ResolverMu]
	cache map[procID]Owner // guarded by mu; the stat path's cache

	// tables are the fdinfo tables of the threads Descriptors read
	// last, least recently used first (closing.go).
	tablesMu     lockorder.Mutex[lockorder.ResolverTabMu]
	tables       []*fdTable // guarded by tablesMu
	tablesClosed bool       // guarded by tablesMu

	// bootID is the head of procRoot's boot id (Incarnation), read once.
	bootOnce sync.Once
	bootID   string
}

// procID identifies a process across pid reuse.
type procID struct {
	pid   uint32
	start uint64 // field 22 of /proc/PID/stat, clock ticks since boot
}

// NewResolver returns a Resolver for mode that reads procRoot, which is
// "/proc" except in tests.
func NewResolver(mode OwnerMode, procRoot string) *Resolver {
	r := &Resolver{
		mode:     mode,
		procRoot: procRoot,
		max:      DefaultCacheSize,
		live:     make(map[uint32]*liveProc),
		cache:    make(map[procID]Owner),
	}
	if procRoot == "/proc" {
		r.pidfd = probePidfd()
	}
	return r
}

// Owner returns the owner of process pid: "cgroup:PATH", "session:N" or
// "pid:N" by the Resolver's mode, and KernelOwner for pid 0. It fails, with
// an error wrapping the cause (often fs.ErrNotExist), if the process has
// vanished or its proc files cannot be parsed.
//
// In pid mode the owner is the process: the kernel names the calling
// thread, so its thread group id is read from /proc/PID/status; a vanished
// thread owns "pid:PID".
func (r *Resolver) Owner(pid uint32) (Owner, error) {
	if pid == 0 {
		return KernelOwner, nil
	}
	if r.pidfd != pidfdNone {
		if o, err := r.pidfdOwner(pid); err != errNoPidfd {
			return o, err
		}
	}
	return r.statOwner(pid)
}

// statOwner is Owner without pidfds: the stat file's start time tells a
// reused pid apart, so it is read on every call (procfs makes it cheap).
func (r *Resolver) statOwner(pid uint32) (Owner, error) {
	if r.mode == OwnerPID {
		return r.processOwner(pid), nil
	}
	dir := r.procDir(pid)
	st, err := readStat(dir + "stat")
	if err != nil {
		return "", fmt.Errorf("procinfo: owner of pid %d: %w", pid, err)
	}
	if r.mode == OwnerSession {
		return sessionOwner(st.session), nil
	}
	if r.mode != OwnerCgroup {
		return "", fmt.Errorf("procinfo: owner of pid %d: unknown mode %v", pid, r.mode)
	}

	id := procID{pid: pid, start: st.start}
	r.mu.Lock()
	o, ok := r.cache[id]
	r.mu.Unlock()
	if ok {
		return o, nil
	}

	o, err = readCgroupOwner(dir)
	if err != nil {
		return "", fmt.Errorf("procinfo: owner of pid %d: %w", pid, err)
	}
	// The process may have exited and its pid been reused between the two
	// reads; then the cgroup is the newcomer's and must not be cached under
	// the old start time.
	st2, err := readStat(dir + "stat")
	if err != nil {
		return "", fmt.Errorf("procinfo: owner of pid %d: %w", pid, err)
	}
	if st2.start != st.start {
		return "", fmt.Errorf("procinfo: owner of pid %d: %w", pid, errPidReused)
	}
	r.store(id, o)
	return o, nil
}

// store caches o under id, dropping an arbitrary entry if the cache is full:
// most are of processes long gone, and a live one dropped costs only a
// reread.
func (r *Resolver) store(id procID, o Owner) {
	r.mu.Lock()
	if len(r.cache) >= r.max {
		for k := range r.cache {
			delete(r.cache, k)
			break
		}
	}
	r.cache[id] = o
	r.mu.Unlock()
}

// procDir returns the proc directory of pid, with a trailing slash.
func (r *Resolver) procDir(pid uint32) string {
	return r.procRoot + "/" + strconv.FormatUint(uint64(pid), 10) + "/"
}

func sessionOwner(sid uint64) Owner {
	return Owner("session:" + strconv.FormatUint(sid, 10))
}

func pidOwner(pid uint64) Owner {
	return Owner("pid:" + strconv.FormatUint(pid, 10))
}

// readCgroupOwner reads the cgroup owner of the process whose proc
// directory is dir.
func readCgroupOwner(dir string) (Owner, error) {
	b, err := os.ReadFile(dir + "cgroup")
	if err != nil {
		return "", err
	}
	path, err := cgroupPath(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", dir+"cgroup", err)
	}
	return Owner("cgroup:" + path), nil
}

var errPidReused = errors.New("process exited and its pid was reused during the lookup")

// stat holds the fields of /proc/PID/stat that owners need.
type stat struct {
	session uint64 // field 6
	start   uint64 // field 22
}

// readStat reads and parses a stat file. It runs on every lookup, so it reads
// into a stack buffer with raw system calls and allocates nothing on success;
// os.ReadFile, sized by procfs's zero file size, grows a heap buffer instead.
func readStat(name string) (stat, error) {
	var buf [2048]byte // a stat line is under 1,100 bytes
	b, err := readSmall(name, buf[:])
	if err != nil {
		return stat{}, err
	}
	st, err := parseStat(b)
	if err != nil {
		return stat{}, fmt.Errorf("%s: %w", name, err)
	}
	return st, nil
}

// readSmall reads the file name into buf and returns the bytes read. A file
// that does not fit is an error.
func readSmall(name string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	for n := 0; n < len(buf); {
		m, err := unix.Read(fd, buf[n:])
		switch {
		case err == unix.EINTR:
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		case m == 0:
			return buf[:n], nil
		default:
			n += m
		}
	}
	return nil, &fs.PathError{Op: "read", Path: name, Err: errTooLong}
}

var errTooLong = errors.New("longer than expected")

// readHead reads the first len(buf) bytes of the file name, or all of a
// shorter file, into buf and returns them.
func readHead(name string, buf []byte) ([]byte, error) {
	b, err := readSmall(name, buf)
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err == errTooLong {
		return buf, nil
	}
	return b, err
}

// parseStat parses a /proc/PID/stat line. Field 2, comm, is in parentheses
// and may itself contain spaces and parentheses, so the fields are counted
// from after the last ')'.
func parseStat(b []byte) (stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || bytes.IndexByte(b, '(') < 0 {
		return stat{}, errors.New("malformed stat: no (comm)")
	}
	var session, start []byte
	rest := b[i+1:]
	for n := 3; n <= 22; n++ { // field 3, state, follows comm
		rest = bytes.TrimLeft(rest, " ")
		f, after, _ := bytes.Cut(rest, []byte(" "))
		if len(f) == 0 {
			return stat{}, fmt.Errorf("malformed stat: no field %d", n)
		}
		switch n {
		case 6:
			session = f
		case 22:
			start = f
		}
		rest = after
	}
	var st stat
	var err error
	if st.session, err = strconv.ParseUint(string(session), 10, 64); err != nil {
		return stat{}, fmt.Errorf("malformed stat: session: %w", err)
	}
	if st.start, err = strconv.ParseUint(string(bytes.TrimRight(start, "\n")), 10, 64); err != nil {
		return stat{}, fmt.Errorf("malformed stat: starttime: %w", err)
	}
	return st, nil
}

// cgroupPath picks the path that names a process's sandbox from the lines
// "ID:CONTROLLERS:PATH" of /proc/PID/cgroup. On a cgroup v2 host that is the
// one line "0::PATH". On hybrid and v1 hosts the v2 line may be missing, or
// be "/" for every process, so the candidates are tried in order: the v2
// line, the name=systemd line, then the other lines in file order; the first
// path other than "/" wins, and "/" if all are "/". Paths are as seen from
// realm's cgroup namespace.
func cgroupPath(b []byte) (string, error) {
	var v2, systemd, rest []string
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		id, after, ok1 := bytes.Cut(line, []byte(":"))
		ctrl, path, ok2 := bytes.Cut(after, []byte(":"))
		if !ok1 || !ok2 || len(path) == 0 || path[0] != '/' {
			return "", fmt.Errorf("malformed cgroup line %q", line)
		}
		switch {
		case string(id) == "0" && len(ctrl) == 0:
			v2 = append(v2, string(path))
		case hasController(ctrl, "name=systemd"):
			systemd = append(systemd, string(path))
		default:
			rest = append(rest, string(path))
		}
	}
	all := append(append(v2, systemd...), rest...)
	if len(all) == 0 {
		return "", errors.New("no cgroup")
	}
	for _, p := range all {
		if p != "/" {
			return p, nil
		}
	}
	return "/", nil
}

func hasController(list []byte, name string) bool {
	for c := range bytes.SplitSeq(list, []byte(",")) {
		if string(c) == name {
			return true
		}
	}
	return false
}

// processOwner is the pid-mode owner of thread pid: its process,
// "pid:TGID". Threads of one process are one owner, as POSIX locks treat
// them.
func (r *Resolver) processOwner(pid uint32) Owner {
	fallback := pidOwner(uint64(pid))
	dir := r.procDir(pid)
	st, err := readStat(dir + "stat")
	if err != nil {
		return fallback
	}
	id := procID{pid: pid, start: st.start}
	r.mu.Lock()
	o, ok := r.cache[id]
	r.mu.Unlock()
	if ok {
		return o
	}
	o, err = readTgidOwner(dir, fallback)
	if err != nil {
		return fallback
	}
	r.store(id, o)
	return o
}

// readTgidOwner reads "pid:TGID" from the status file in dir; fallback if
// the file has no Tgid line.
func readTgidOwner(dir string, fallback Owner) (Owner, error) {
	tgid, ok, err := readTgid(dir)
	if err != nil || !ok {
		return fallback, err
	}
	return pidOwner(uint64(tgid)), nil
}

// readTgid reads the Tgid line of the status file in dir (ok false: the
// file has none). Tgid is the fourth line, so only the head of the file
// is read: the whole can run to many kilobytes (a Groups line with
// hundreds of groups).
func readTgid(dir string) (tgid uint32, ok bool, err error) {
	var buf [1024]byte
	b, err := readHead(dir+"status", buf[:])
	if err != nil {
		return 0, false, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, found := bytes.CutPrefix(line, []byte("Tgid:")); found {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 32)
			return uint32(n), err == nil, nil
		}
	}
	return 0, false, nil
}

// Process is the process (thread group id) of thread tid, for a Resolver
// in pid mode; tid itself if it cannot be read (the thread is gone) or the
// Resolver names owners otherwise.
func (r *Resolver) Process(tid uint32) uint32 {
	o, err := r.Owner(tid)
	if err != nil {
		return tid
	}
	return pidOf(o, tid)
}

// pidOf is the number of a "pid:N" owner o; fallback for any other owner.
func pidOf(o Owner, fallback uint32) uint32 {
	v, ok := strings.CutPrefix(string(o), "pid:")
	if !ok {
		return fallback
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fallback
	}
	return uint32(n)
}

// ThreadGroup is the process (thread group id) of thread tid, as
// /proc/TID/status says, whatever the owner mode: FUSE names a request's
// caller by its thread, and a thread other than its process's first has
// an id of its own. tid itself where that cannot be read (the thread is
// gone); 0 for 0.
func ThreadGroup(tid uint32) uint32 {
	if tid == 0 {
		return 0
	}
	tgid, ok, err := readTgid(fmt.Sprintf("/proc/%d/", tid))
	if err != nil || !ok {
		return tid
	}
	return tgid
}

// IsThreadOf reports whether thread tid belongs to process tgid. It looks the
// thread up in the process's task directory and reads none of the thread's
// own files: a thread that is inside execve, or faulting, holds locks that
// reading them would wait for, and it may be waiting for the caller.
func (r *Resolver) IsThreadOf(tgid, tid uint32) bool {
	if tgid == 0 || tid == 0 {
		return false
	}
	if tgid == tid {
		return true
	}
	var st unix.Stat_t
	name := r.procRoot + "/" + strconv.FormatUint(uint64(tgid), 10) + "/task/" + strconv.FormatUint(uint64(tid), 10)
	return unix.Stat(name, &st) == nil
}
