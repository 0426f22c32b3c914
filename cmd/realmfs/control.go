package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/undo"
)

// The daemon's control socket (journal.ControlName, in the journal's
// directory: mode 0700, the daemon's user's): one request a connection,
// one JSON line each way. Only root and the daemon's own user are
// answered (SO_PEERCRED), whatever the directory's mode.

// controlRequest is what `realmfs journal undo` on a mountpoint asks.
type controlRequest struct {
	Op     string    `json:"op"` // undo
	Owner  string    `json:"owner"`
	Since  time.Time `json:"since,omitzero"`
	DryRun bool      `json:"dry_run,omitempty"`
}

// controlReply is the daemon's answer.
type controlReply struct {
	Result undo.Result `json:"result"`
	Error  string      `json:"error,omitempty"`
}

// startControl listens on the journal's control socket, if the mount keeps
// a journal; stop closes it and removes its name.
func startControl(cfg config, j *journal.Journal, fsys *fusefs.FS, logger *slog.Logger) (stop func()) {
	if j == nil {
		return func() {}
	}
	l, err := j.Listen()
	if err != nil {
		logger.Warn("no control socket: realmfs journal undo needs the mount unmounted", "err", err)
		return func() {}
	}
	root, err := dirfd.OpenRoot(cfg.backing)
	if err != nil {
		l.Close()
		logger.Warn("no control socket", "err", err)
		return func() {}
	}
	c := &controller{root: root, j: j, fsys: fsys, logger: logger}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serve(l)
	}()
	return func() {
		l.Close()
		<-done
		c.wg.Wait()
		dirfd.Close(root)
		if err := j.Unlisten(); err != nil {
			logger.Warn("control socket", "err", err)
		}
	}
}

// controller answers the control socket's requests, one undo at a time.
type controller struct {
	root   int
	j      *journal.Journal
	fsys   *fusefs.FS
	logger *slog.Logger
	mu     sync.Mutex // one undo at a time
	wg     sync.WaitGroup
}

func (c *controller) serve(l *net.UnixListener) {
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.logger.Warn("control socket", "err", err)
			}
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer conn.Close()
			c.answer(conn)
		}()
	}
}

// answer reads one request from conn and writes its reply.
func (c *controller) answer(conn *net.UnixConn) {
	reply := func(r controlReply) { _ = json.NewEncoder(conn).Encode(r) }
	uid, err := dirfd.PeerUID(conn)
	if err != nil || (uid != 0 && uid != uint32(os.Geteuid())) {
		reply(controlReply{Error: fmt.Sprintf("refused: only root and the daemon's user (uid %d) may ask", os.Geteuid())})
		return
	}
	var req controlRequest
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
		reply(controlReply{Error: "a bad request: " + err.Error()})
		return
	}
	if req.Op != "undo" || req.Owner == "" {
		reply(controlReply{Error: fmt.Sprintf("a bad request: op %q, owner %q (want undo and an owner)", req.Op, req.Owner)})
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res, err := undo.Run(c.root, c.j, undo.Options{Window: undo.Window{Owner: req.Owner, Since: req.Since},
		DryRun: req.DryRun, Lock: c.fsys.Exclusively,
		Held: func(id journal.ID) (string, bool) { return c.fsys.WriteHolder(id.Dev, id.Ino) }})
	r := controlReply{Result: res}
	if err != nil {
		r.Error = err.Error()
	}
	c.logger.Info("journal undo", "owner", req.Owner, "since", req.Since, "dry_run", req.DryRun,
		"undone", len(res.Steps), "conflicts", len(res.Conflicts), "err", err)
	reply(r)
}
