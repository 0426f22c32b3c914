package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/diff"
	"github.com/realm-dev/realm/fusefs/journal/undo"
)

// The daemon's control socket: `realmfs status` and `realmfs journal undo`
// on a mountpoint ask the daemon through it. It is MAJOR:MINOR.sock (the
// mount's device number, unique while mounted) in the control directory of
// the daemon's user: /run/realmfs for root, $XDG_RUNTIME_DIR/realmfs
// (else /run/user/UID/realmfs) for another, made 0700 and refused unless
// the user's own. One request a connection, one JSON line each way; only
// uid 0 and the daemon's uid are answered (SO_PEERCRED), whatever the
// modes.

// controlDir is where uid's daemons keep their control sockets (xdg: the
// user's XDG_RUNTIME_DIR, if known).
func controlDir(uid int, xdg string) string {
	if uid == 0 {
		return "/run/realmfs"
	}
	return filepath.Join(cmp.Or(xdg, "/run/user/"+strconv.Itoa(uid)), "realmfs")
}

// controlPath is the control socket of the mount with device number dev
// in dir.
func controlPath(dir string, dev uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%d:%d.sock", unix.Major(dev), unix.Minor(dev)))
}

// controlRequest is what a command asks the daemon.
type controlRequest struct {
	Op     string    `json:"op"` // status, undo, sync (write the journal's held ends), credentials
	Owner  string    `json:"owner,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	DryRun bool      `json:"dry_run,omitempty"`
	// Files: credentials asks, for each, whether it is one (journal diff).
	Files []diff.Item `json:"files,omitempty"`
}

// controlReply is the daemon's answer.
type controlReply struct {
	Status *daemonStatus `json:"status,omitempty"`
	Result *undo.Result  `json:"result,omitempty"`
	// Credential: the answer to credentials, one per file asked.
	Credential []bool `json:"credential,omitempty"`
	Error      string `json:"error,omitempty"`
}

// startControl listens on the mount's control socket (dev: the mount's
// device number); stop closes it and removes its name. A daemon that
// cannot listen says so in its log and serves the mount without one.
func startControl(cfg config, root int, dev uint64, devKnown bool, j *journal.Journal, fsys *fusefs.FS, logger *slog.Logger) (c *controller, stop func()) {
	c = &controller{cfg: cfg, j: j, fsys: fsys, logger: logger, root: -1, started: time.Now()}
	if !devKnown {
		return c, func() {}
	}
	dir := controlDir(os.Geteuid(), os.Getenv("XDG_RUNTIME_DIR"))
	path := controlPath(dir, dev)
	l, err := listenControl(dir, path)
	if err != nil {
		logger.Warn("no control socket: realmfs status and journal undo cannot ask this daemon", "path", path, "err", err)
		return c, func() {}
	}
	if j != nil {
		if c.root, err = dirfd.Dup(root); err != nil {
			logger.Warn("control socket: journal undo", "err", err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serve(l)
	}()
	return c, func() {
		l.Close()
		c.closeConns() // frees the slots serve may wait for
		<-done
		c.wg.Wait()
		if c.root >= 0 {
			dirfd.Close(c.root)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			logger.Warn("control socket", "err", err)
		}
	}
}

// listenControl makes dir (0700, the daemon's user's) and listens at path,
// replacing a socket a killed daemon left there.
func listenControl(dir, path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
		return nil, fmt.Errorf("%s is not a directory of uid %d", dir, os.Geteuid())
	}
	if st.Mode&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := unix.Lstat(path, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		os.Remove(path)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// controller answers the control socket's requests, one undo at a time.
type controller struct {
	cfg     config
	root    int // BACKING's root, for undo (-1: none)
	j       *journal.Journal
	fsys    *fusefs.FS
	logger  *slog.Logger
	started time.Time
	mu      sync.Mutex // one undo at a time
	wg      sync.WaitGroup
	// conns: the connections served now, closed at stop (closeConns).
	connsMu  sync.Mutex
	conns    map[*net.UnixConn]struct{}
	stopping bool
	sweep    struct {
		sync.Mutex
		res *fusefs.ScanResult
	}
}

// swept keeps the mount-time scan's result for status.
func (c *controller) swept(res fusefs.ScanResult) {
	c.sweep.Lock()
	c.sweep.res = &res
	c.sweep.Unlock()
}

// The control socket's bounds: a client has requestPatience to send its
// request, and at most maxControlConns are served at once (the rest wait
// in the listen backlog, holding none of the daemon's descriptors). A
// client that connects and sends nothing so holds a slot for a moment,
// not for ever, and never the daemon's exit.
const (
	requestPatience = 5 * time.Second
	maxControlConns = 32
)

// serve accepts and answers the control socket's connections until l is
// closed. An accept that fails for a moment (no descriptor left) is
// retried after a pause that grows to a second.
func (c *controller) serve(l *net.UnixListener) {
	slots := make(chan struct{}, maxControlConns)
	var pause time.Duration
	for {
		slots <- struct{}{}
		conn, err := l.AcceptUnix()
		if err != nil {
			<-slots
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 10*time.Millisecond), time.Second)
			c.logger.Warn("control socket: accept", "err", err, "retry_in", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		if !c.track(conn) { // stopping
			conn.Close()
			<-slots
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() { <-slots }()
			defer c.untrack(conn)
			_ = json.NewEncoder(conn).Encode(c.answer(conn))
		}()
	}
}

// track notes conn as served, for closeConns; false once stopping.
func (c *controller) track(conn *net.UnixConn) bool {
	c.connsMu.Lock()
	defer c.connsMu.Unlock()
	if c.stopping {
		return false
	}
	if c.conns == nil {
		c.conns = make(map[*net.UnixConn]struct{})
	}
	c.conns[conn] = struct{}{}
	return true
}

// untrack closes conn, served.
func (c *controller) untrack(conn *net.UnixConn) {
	c.connsMu.Lock()
	delete(c.conns, conn)
	c.connsMu.Unlock()
	conn.Close()
}

// closeConns closes every connection served, at stop: a client reading
// its answer, or one that never sent its request, gets EOF now, and the
// daemon's exit waits for no one.
func (c *controller) closeConns() {
	c.connsMu.Lock()
	defer c.connsMu.Unlock()
	c.stopping = true
	for conn := range c.conns {
		conn.Close()
	}
}

// answer reads one request from conn and answers it.
func (c *controller) answer(conn *net.UnixConn) controlReply {
	if uid, err := peerUID(conn); err != nil || (uid != 0 && uid != uint32(os.Geteuid())) {
		return controlReply{Error: fmt.Sprintf("refused: only root and the daemon's user (uid %d) may ask", os.Geteuid())}
	}
	var req controlRequest
	conn.SetReadDeadline(time.Now().Add(requestPatience))
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
		return controlReply{Error: "a bad request: " + err.Error()}
	}
	switch req.Op {
	case "status":
		st := c.status()
		return controlReply{Status: &st}
	case "undo":
		return c.undo(req)
	case "sync":
		if c.j != nil {
			if err := c.j.WriteHeld(); err != nil {
				return controlReply{Error: err.Error()}
			}
		}
		return controlReply{}
	case "credentials":
		cred := make([]bool, len(req.Files))
		for i, f := range req.Files {
			cred[i] = c.fsys.Credential(f.Path, f.ID.Dev, f.ID.Ino)
		}
		return controlReply{Credential: cred}
	}
	return controlReply{Error: fmt.Sprintf("a bad request: op %q (want status, undo, sync or credentials)", req.Op)}
}

// undo runs journal undo for req.Owner.
func (c *controller) undo(req controlRequest) controlReply {
	if c.j == nil || c.root < 0 {
		return controlReply{Error: "the mount keeps no journal (-o journal=on)"}
	}
	if req.Owner == "" {
		return controlReply{Error: "a bad request: undo needs an owner"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res, err := undo.Run(c.root, c.j, undo.Options{Window: undo.Window{Owner: req.Owner, Since: req.Since},
		DryRun: req.DryRun, Lock: c.fsys.Exclusively,
		Held: func(id journal.ID) (string, bool) { return c.fsys.WriteHolder(id.Dev, id.Ino) }})
	r := controlReply{Result: &res}
	if err != nil {
		r.Error = err.Error()
	}
	c.logger.Info("journal undo", "owner", req.Owner, "since", req.Since, "dry_run", req.DryRun,
		"undone", len(res.Steps), "conflicts", len(res.Conflicts), "err", err)
	return r
}

// peerUID is the uid of the process at the other end of c (SO_PEERCRED).
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return cred.Uid, nil
}

// askDaemon sends req to the daemon of the realmfs mount at mnt and
// returns its reply.
func askDaemon(mnt string, req controlRequest) (controlReply, error) {
	path, err := controlPathOf(mnt)
	if err != nil {
		return controlReply{}, err
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return controlReply{}, fmt.Errorf("the daemon's control socket %s: %w", path, err)
	}
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return controlReply{}, fmt.Errorf("asking the daemon: %w", err)
	}
	var reply controlReply
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&reply); err != nil {
		return controlReply{}, fmt.Errorf("the daemon's answer: %w", err)
	}
	if reply.Error != "" {
		return reply, fmt.Errorf("the daemon: %s", reply.Error)
	}
	return reply, nil
}

// controlPathOf is the control socket of the realmfs mount at mnt (as
// mountinfo names it): by its device number, in the control directory of
// the user it was mounted by (its user_id).
func controlPathOf(mnt string) (string, error) {
	m, ok, err := realmfsMount(mnt)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s is not a realmfs mount", mnt)
	}
	uid := 0
	for _, o := range strings.Split(m.VFSOptions, ",") {
		if v, ok := strings.CutPrefix(o, "user_id="); ok {
			uid, _ = strconv.Atoi(v)
		}
	}
	xdg := ""
	if uid == os.Geteuid() {
		xdg = os.Getenv("XDG_RUNTIME_DIR")
	}
	return controlPath(controlDir(uid, xdg), unix.Mkdev(uint32(m.Major), uint32(m.Minor))), nil
}
