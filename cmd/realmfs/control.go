package main

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/diff"
	"github.com/realm-dev/realm/fusefs/journal/undo"
	"github.com/realm-dev/realm/internal/rundir"
)

// The daemon's control socket (internal/rundir: where it is, who may ask,
// its bounds): `realmfs status` and `realmfs journal` on a mountpoint ask
// the daemon through it. One request a connection, one JSON line each way.

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
	dir := rundir.ControlDir(os.Geteuid(), os.Getenv("XDG_RUNTIME_DIR"))
	path := rundir.ControlPath(dir, dev)
	if j != nil {
		var err error
		if c.root, err = dirfd.Dup(root); err != nil {
			logger.Warn("control socket: journal undo", "err", err)
		}
	}
	srv, err := rundir.Listen(dir, path, c.answer, logger)
	if err != nil {
		logger.Warn("no control socket: realmfs status and journal undo cannot ask this daemon", "path", path, "err", err)
		c.closeRoot()
		return c, func() {}
	}
	return c, func() {
		if err := srv.Close(); err != nil {
			logger.Warn("control socket", "err", err)
		}
		c.closeRoot()
	}
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
	sweep   struct {
		sync.Mutex
		res *fusefs.ScanResult
	}
}

// closeRoot closes the controller's BACKING root, at stop.
func (c *controller) closeRoot() {
	if c.root >= 0 {
		dirfd.Close(c.root)
		c.root = -1
	}
}

// swept keeps the mount-time scan's result for status.
func (c *controller) swept(res fusefs.ScanResult) {
	c.sweep.Lock()
	c.sweep.res = &res
	c.sweep.Unlock()
}

// answer reads one request and answers it (a rundir.Handler).
func (c *controller) answer(decode func(any) error) any {
	var req controlRequest
	if err := decode(&req); err != nil {
		return controlReply{Error: err.Error()}
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

// askDaemon sends req to the daemon of the realmfs mount at mnt and
// returns its reply.
func askDaemon(mnt string, req controlRequest) (controlReply, error) {
	path, err := rundir.ControlPathOf(mnt)
	if err != nil {
		return controlReply{}, err
	}
	var reply controlReply
	if err := rundir.Ask(path, req, &reply); err != nil {
		return controlReply{}, err
	}
	if reply.Error != "" {
		return reply, fmt.Errorf("the daemon: %s", reply.Error)
	}
	return reply, nil
}
