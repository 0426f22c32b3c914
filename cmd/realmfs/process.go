package main

import (
	"log/slog"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/adaptprocs"
)

// setupProcess makes the daemon's process-wide settings and returns its
// raised descriptor limit: no umask (the daemon applies each caller's:
// fusefs/admit Gate.NewMode), / as its directory, and -o procs as its
// GOMAXPROCS before the FUSE server sizes its readers by it (one P:
// docs/PERFORMANCE.md, "One P for the daemon").
func setupProcess(mo mountOptions) uint64 {
	unix.Umask(0)
	os.Chdir("/")
	if mo.procs > 0 {
		runtime.GOMAXPROCS(mo.procs)
	}
	return raiseFileLimit()
}

// raiseFileLimit lifts the soft fd limit to the hard one (each open file
// holds at least one fd in the daemon, each directory in use one) and
// returns the limit in force, 0 if unknown.
func raiseFileLimit() uint64 {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	raised := unix.Rlimit{Cur: lim.Max, Max: lim.Max}
	if lim.Cur < lim.Max && unix.Setrlimit(unix.RLIMIT_NOFILE, &raised) == nil {
		return raised.Cur
	}
	return lim.Cur
}

// adaptProcs adapts the daemon's Ps to its mount's requests, sampled by
// the requests themselves (internal/adaptprocs), unless fixed; the
// function it returns ends it.
func adaptProcs(fsys *fusefs.FS, dev uint64, fixed bool, logger *slog.Logger) (stop func()) {
	procs := adaptprocs.Start(adaptprocs.WaitingFile(unix.Minor(dev)), fixed,
		adaptprocs.Counters{Syncs: dirfd.Syncs, Callers: fsys.TakeCallers}, logger)
	if procs == nil {
		return func() {}
	}
	fsys.OnRequest(procs.Request)
	return procs.Stop
}
