package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/diff"
	"github.com/realm-dev/realm/fusefs/journal/undo"
	"github.com/realm-dev/realm/internal/rundir"
)

// runUndo runs `realmfs journal undo`: through the daemon's control socket
// on a mountpoint, itself (holding the journal's LOCK) on an unmounted
// BACKING. Exit status 1 if a path was left alone.
func runUndo(jc journalCmd, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "realmfs journal undo: %v\n", err)
		return errcode.ExitFailure
	}
	abs, err := filepath.Abs(jc.target)
	if err != nil {
		return fail(err)
	}
	mnt := abs
	_, mounted, _ := rundir.MountAt(mnt)
	if !mounted {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			mnt = real
			_, mounted, _ = rundir.MountAt(mnt)
		}
	}
	var res undo.Result
	if mounted {
		res, err = undoMounted(jc, mnt)
	} else {
		res, err = undoOffline(jc)
	}
	writeUndo(stdout, res, jc.dryRun)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stderr, "realmfs journal undo: %d changes undone, %d paths left alone\n", len(res.Steps), len(res.Conflicts))
	if len(res.Conflicts) > 0 {
		return errcode.ExitFailure
	}
	return 0
}

// undoMounted asks the daemon of the mount at mnt to undo.
func undoMounted(jc journalCmd, mnt string) (undo.Result, error) {
	reply, err := askDaemon(mnt, controlRequest{Op: "undo", Owner: jc.owner, Since: jc.since, DryRun: jc.dryRun})
	if reply.Result == nil {
		return undo.Result{}, err
	}
	return *reply.Result, err
}

// undoOffline undoes in an unmounted BACKING, holding the journal's LOCK
// (a mount of BACKING holds it: then its mountpoint is the TARGET).
func undoOffline(jc journalCmd) (undo.Result, error) {
	r, root, backing, err := readJournal(jc.target, jc.journalDir) // refuses a BACKING with no journal
	if err != nil {
		return undo.Result{}, err
	}
	r.Close()
	defer dirfd.Close(root)
	dir := journal.DefaultDir
	if jc.journalDir != "" {
		if dir, err = dirfd.OpenRoot(jc.journalDir); err != nil {
			return undo.Result{}, fmt.Errorf("--journal-dir: %w", err)
		}
		defer dirfd.Close(dir)
	}
	// Durable: an undo is rare, and each of its records is on disk
	// before its change.
	j, err := journal.Open(root, dir, journal.Options{Durable: true})
	if errors.Is(err, journal.ErrLocked) {
		return undo.Result{}, fmt.Errorf("%s: %w: give the mount's mountpoint as TARGET, and its daemon undoes", backing, err)
	}
	if err != nil {
		return undo.Result{}, fmt.Errorf("%s: %w", backing, err)
	}
	res, err := undo.Run(root, j, undo.Options{Window: undo.Window{Owner: jc.owner, Since: jc.since}, DryRun: jc.dryRun})
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// writeUndo writes what an undo did (or would do): a line for each change
// undone, newest first, then one for each path left alone.
func writeUndo(w io.Writer, res undo.Result, dryRun bool) {
	b := bufio.NewWriter(w)
	defer b.Flush()
	verb := "undone"
	if dryRun {
		verb = "would undo"
	}
	for _, s := range res.Steps {
		path := diff.ShowPath(s.Path)
		if s.To != "" {
			path += " → " + diff.ShowPath(s.To)
		}
		if s.Done == "" {
			fmt.Fprintf(b, "%s %d %s %s\n", verb, s.Seq, s.Op, path)
		} else {
			fmt.Fprintf(b, "%s %d %s %s: %s\n", verb, s.Seq, s.Op, path, s.Done)
		}
	}
	for _, c := range res.Conflicts {
		fmt.Fprintf(b, "conflict %s: %s; left as it is (change %d not undone)\n", diff.ShowPath(c.Path), c.Why, c.Seq)
	}
}
