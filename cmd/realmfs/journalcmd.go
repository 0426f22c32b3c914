package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/diff"
	"github.com/realm-dev/realm/fusefs/journal/ownerarg"
	"github.com/realm-dev/realm/internal/rundir"
	"github.com/realm-dev/realm/policy"
)

const journalUsageText = `Usage: realmfs journal list TARGET [--owner OWNER] [--since TIME] [-o json] [--journal-dir DIR]
       realmfs journal diff TARGET [--owner OWNER] [--since TIME] [--journal-dir DIR] [--policy FILE]
       realmfs journal undo TARGET --owner OWNER [--since TIME] [--dry-run] [--journal-dir DIR]

Read the journal of the changes made through a realmfs mount (docs/JOURNAL.md).
TARGET is the mountpoint of a realmfs mount (its BACKING is found in
/proc/self/mountinfo) or a BACKING directory, mounted or not. The journal is
BACKING/.realm-journal, or --journal-dir DIR (a mount's -o journal_dir). It
is read as it is, beside a daemon appending to it: nothing is locked or
written. The journal is its daemon's user's (mode 0700): run as that user.

  list  one line per change, newest last: its seq, time (UTC), owner,
        operation, end (done, aborted, or in progress: no end yet), whether
        the version it replaced or removed is kept, and its path (→ the new
        name of a rename or a link); -o json: one JSON object per line
  diff  for each path changed in the window, the state before the first
        change in it (the kept version, or the record's metadata) against
        BACKING now: a unified diff of text files, "binary, SIZE → SIZE"
        otherwise; files, directories and symlinks created and deleted,
        renames as renames, mode and owner changes. A credential's content
        is never shown (its sizes are): one under the policy's paths
        (--policy FILE, else the built-in policy), or one the mount's
        daemon knows (by path or identity: a hard link to a key)
  undo  puts every path OWNER changed in the window back as it was before
        OWNER's first change in it, newest change first: a rewritten file's
        old version, a removed file or directory, a renamed one at its old
        name, mode, owner and times; what OWNER made is removed (kept in
        the journal). A path another owner changed after OWNER (or one
        changed from outside the mount since) is left as it is and listed
        as a conflict. Undo's own changes are journaled as the owner
        undo:OWNER, so that an undo can be undone. On a mountpoint the
        daemon does the undo; on an unmounted BACKING this command does,
        holding the journal's LOCK. --dry-run lists what would be undone.

--owner keeps the changes of one owner, as the audit log writes it
(cgroup:…, session:N, pid:N); --since those made at or after TIME, an
RFC3339 time (2026-12-03T17:00:00Z) or a duration before now (10m, 2h).
A session or pid id is given again once its owner is gone, so the journal
records each change's incarnation too (its leader's or process's start;
list shows session:N@START): --owner session:N@START keeps one (@- those
recorded with none). undo refuses a bare session:N or pid:N whose window
holds the changes of more than one, listing them, and undoes nothing; a
later change of another incarnation is a conflict as another owner's is.

Exit status: 0 done, 1 error (no journal at TARGET, unreadable) or, for
undo, a path left alone (a conflict), 2 usage.

Examples:
  realmfs journal list /mnt/work
  realmfs journal list /mnt/work --owner session:7 --since 1h -o json
  realmfs journal diff /srv/workspace --since 2026-12-03T17:00:00Z
  realmfs journal diff /srv/workspace --journal-dir /srv/.journals/workspace
  realmfs journal undo /mnt/work --owner session:7 --since 1h --dry-run
  realmfs journal undo /mnt/work --owner session:7@4242-196df20c

Flags:
`

// journalCmd is a journal command as its flags ask.
type journalCmd struct {
	name       string // list or diff
	target     string
	owner      string
	since      time.Time
	json       bool
	journalDir string
	dryRun     bool
	policyFile string
}

// runJournal runs `realmfs journal list|diff` (args after "journal").
func runJournal(args []string, stdout, stderr io.Writer) int {
	jc, code, ok := parseJournalArgs(args, stdout, stderr, time.Now())
	if !ok {
		return code
	}
	if jc.name == "undo" {
		return runUndo(jc, stdout, stderr)
	}
	syncHeld(jc.target)
	r, root, backing, err := readJournal(jc.target, jc.journalDir)
	if err != nil {
		fmt.Fprintf(stderr, "realmfs journal %s: %v\n", jc.name, err)
		return errcode.ExitFailure
	}
	defer dirfd.Close(root)
	defer r.Close()
	owner, start, pinned := ownerarg.Split(jc.owner)
	f := journal.Filter{Owner: owner, Since: jc.since}
	recs, err := r.Records(f)
	if pinned {
		recs = ofIncarnation(recs, start)
	}
	if err == nil {
		if jc.name == "list" {
			err = writeList(stdout, recs, jc.json)
		} else {
			var judge diff.Withheld
			if judge, err = credentialJudge(jc, stderr); err == nil {
				err = diff.Write(stdout, root, r, recs, judge)
			}
		}
	}
	if err == nil {
		notePruned(stderr, r, jc)
	}
	if err != nil {
		fmt.Fprintf(stderr, "realmfs journal %s: %s: %v\n", jc.name, backing, err)
		return errcode.ExitFailure
	}
	return 0
}

// ofIncarnation keeps, of recs, the changes of the owner's incarnation
// start (--owner OWNER@START).
func ofIncarnation(recs []journal.Record, start string) []journal.Record {
	return slices.DeleteFunc(recs, func(r journal.Record) bool { return r.OwnerStart != start })
}

// credentialJudge is how journal diff tells a credential, whose content it
// withholds: by the policy's paths (--policy, else the built-in policy),
// and, where a daemon serves the target, by the daemon's answer too,
// which also knows credentials by identity (a hard link under another
// name). A daemon that does not answer leaves the policy's paths alone,
// and says so.
func credentialJudge(jc journalCmd, stderr io.Writer) (diff.Withheld, error) {
	p := policy.Default()
	if jc.policyFile != "" {
		var err error
		if p, err = policy.Load(jc.policyFile); err != nil {
			return nil, err
		}
	}
	m := p.Matcher()
	mnts := daemonsOf(jc.target)
	return func(items []diff.Item) ([]bool, error) {
		cred := make([]bool, len(items))
		for i, it := range items {
			cred[i] = m.Denied(it.Path)
		}
		for _, mnt := range mnts {
			reply, err := askDaemon(mnt, controlRequest{Op: "credentials", Files: items})
			if err == nil && reply.Error == "" && len(reply.Credential) == len(items) {
				for i, c := range reply.Credential {
					cred[i] = cred[i] || c
				}
				return cred, nil
			}
		}
		if len(mnts) > 0 {
			fmt.Fprintf(stderr, "realmfs journal diff: the daemon of %s did not say which files are credentials: withheld by the policy's paths alone\n", jc.target)
		}
		return cred, nil
	}, nil
}

// syncHeld has the daemon of the mount at target, or of each realmfs
// mount of target (a BACKING), write the ends of its last changes, which
// it holds for a moment (journal.endsDelay), so that no change that has
// ended reads as in progress. None mounted, no daemon to ask, or none
// that answers within two seconds: the records are read as they are.
func syncHeld(target string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, mnt := range daemonsOf(target) {
			_, _ = askDaemon(mnt, controlRequest{Op: "sync"})
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

// daemonsOf are the mountpoints whose daemons serve target: itself, if
// it is a realmfs mount, else the realmfs mounts whose source (BACKING)
// it is.
func daemonsOf(target string) []string {
	if _, ok, _ := rundir.MountAt(target); ok {
		return []string{target}
	}
	real, _ := filepath.EvalSymlinks(target)
	mounts, _ := rundir.Mounts()
	var mnts []string
	for _, m := range mounts {
		if real != "" && filepath.Clean(m.Source) == real {
			mnts = append(mnts, m.Mountpoint)
		}
	}
	return mnts
}

// parseJournalArgs parses the command line of a journal command; false
// with the exit status when it is done (help printed, usage error).
func parseJournalArgs(args []string, stdout, stderr io.Writer, now time.Time) (journalCmd, int, bool) {
	var jc journalCmd
	usageErr := func(format string, a ...any) (journalCmd, int, bool) {
		fmt.Fprintf(stderr, "realmfs journal: "+format+" (see realmfs journal --help)\n", a...)
		return jc, errcode.ExitUsage, false
	}
	flags := pflag.NewFlagSet("realmfs journal", pflag.ContinueOnError)
	var since, output string
	flags.StringVar(&jc.owner, "owner", "", "only the changes of `OWNER` (cgroup:…, session:N, pid:N)")
	flags.StringVar(&since, "since", "", "only the changes made at or after `TIME` (RFC3339, or a duration before now: 10m)")
	flags.StringVarP(&output, "output", "o", "", "list: `json` for one JSON object per change")
	flags.BoolVar(&jc.dryRun, "dry-run", false, "undo: list what would be undone, change nothing")
	flags.StringVar(&jc.journalDir, "journal-dir", "", "the journal is in `DIR` (a mount's -o journal_dir), not BACKING/.realm-journal")
	flags.StringVar(&jc.policyFile, "policy", "", "diff: the mount's policy `FILE`, whose credentials' content is withheld (default: the built-in policy)")
	if help, err := parseSubFlags(flags, journalUsageText, args, stdout); help || err != nil {
		if help {
			return jc, 0, false
		}
		return usageErr("%v", err)
	}
	if flags.NArg() == 0 {
		return usageErr("need a command: list, diff or undo")
	}
	jc.name = flags.Arg(0)
	if jc.name != "list" && jc.name != "diff" && jc.name != "undo" {
		return usageErr("unknown command %q: list, diff or undo (to mount a directory named journal, write ./journal)", jc.name)
	}
	if flags.NArg() != 2 {
		return usageErr("%s needs one TARGET (a mountpoint or BACKING), got %d arguments", jc.name, flags.NArg()-1)
	}
	jc.target = flags.Arg(1)
	switch {
	case output == "json" && jc.name == "list":
		jc.json = true
	case output != "":
		return usageErr("-o %q: only list takes -o, and only -o json", output)
	}
	if since != "" {
		t, err := parseSince(since, now)
		if err != nil {
			return usageErr("--since %q: %v", since, err)
		}
		jc.since = t
	}
	if jc.owner != "" && strings.TrimSpace(jc.owner) != jc.owner {
		return usageErr("--owner %q: an owner has no surrounding spaces", jc.owner)
	}
	switch {
	case jc.name == "undo" && jc.owner == "":
		return usageErr("undo needs --owner OWNER: whose changes to put back (realmfs journal list shows the owners)")
	case jc.dryRun && jc.name != "undo":
		return usageErr("--dry-run: only undo takes it")
	}
	return jc, 0, true
}

// parseSince is --since's time: RFC3339, or a positive duration before
// now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, errors.New("want an RFC3339 time (2026-12-03T17:00:00Z) or a duration before now (10m, 2h)")
	}
	return now.Add(-d), nil
}

// readJournal opens the journal of target (a realmfs mountpoint or a
// BACKING) for reading: its Reader, BACKING's root fd (the caller's to
// close) and BACKING's path.
func readJournal(target, journalDir string) (*journal.Reader, int, string, error) {
	backing, err := backingOf(target)
	if err != nil {
		return nil, -1, "", err
	}
	root, err := dirfd.OpenRoot(backing)
	if err != nil {
		return nil, -1, backing, fmt.Errorf("BACKING: %w", err)
	}
	dir, where := journal.DefaultDir, filepath.Join(backing, journal.DirName)
	if journalDir != "" {
		if dir, err = dirfd.OpenRoot(journalDir); err != nil {
			dirfd.Close(root)
			return nil, -1, backing, fmt.Errorf("--journal-dir: %w", err)
		}
		defer dirfd.Close(dir)
		where = journalDir
	}
	r, err := journal.OpenReader(root, dir)
	if err != nil {
		dirfd.Close(root)
		switch {
		case errors.Is(err, journal.ErrNoJournal):
			return nil, -1, backing, fmt.Errorf("%s has no journal (%s: %w)", backing, where, unix.ENOENT)
		case errors.Is(err, unix.EACCES):
			return nil, -1, backing, fmt.Errorf("%s: %w: the journal is its daemon's user's (mode 0700): run as that user", where, unix.EACCES)
		}
		return nil, -1, backing, fmt.Errorf("%s: %w", where, err)
	}
	return r, root, backing, nil
}

// backingOf is the BACKING of target: the source /proc/self/mountinfo
// gives a realmfs mount at target (its fsname, BACKING's absolute path
// unless -o fsname named it otherwise), else target itself.
func backingOf(target string) (string, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	if src, ok, err := realmfsSource(abs); ok || err != nil {
		return src, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("TARGET: %w", err)
	}
	if src, ok, err := realmfsSource(real); ok || err != nil {
		return src, err
	}
	return real, nil
}

// realmfsSource is the BACKING of the realmfs mount at mnt, the newest
// there; ok false if the newest mount at mnt is none.
func realmfsSource(mnt string) (string, bool, error) {
	m, ok, err := rundir.MountAt(mnt)
	if err != nil || !ok {
		return "", false, nil
	}
	if !filepath.IsAbs(m.Source) {
		return "", true, fmt.Errorf("%s is a realmfs mount of %q, not of a path (mounted with -o fsname?): give its BACKING directory", mnt, m.Source)
	}
	return m.Source, true, nil
}

// notePruned says on stderr that the journal's bounds dropped changes a
// window reaching that far back would have held.
func notePruned(stderr io.Writer, r *journal.Reader, jc journalCmd) {
	pruned, err := r.Pruned()
	if err != nil || pruned == 0 {
		return
	}
	all, err := r.Records(journal.Filter{})
	if err != nil || len(all) > 0 && all[0].Time.Before(jc.since) {
		return
	}
	fmt.Fprintf(stderr, "realmfs journal %s: note: the journal's bounds dropped changes 1 to %d (journal_max, journal_keep): the window reaches past them\n", jc.name, pruned)
}

// endText is how a change ended, as list says it.
func endText(e journal.End) string {
	if e == "" {
		return "in progress"
	}
	return string(e)
}

// writeList writes list's lines: a table, or one JSON object per change.
func writeList(w io.Writer, recs []journal.Record, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for i := range recs {
			if err := enc.Encode(listEntryOf(&recs[i])); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tOWNER\tOP\tEND\tKEPT\tPATH")
	for _, r := range recs {
		kept := "-"
		if r.Kept {
			kept = "kept"
		}
		path := diff.ShowPath(r.Path)
		if r.To != "" {
			path += " → " + diff.ShowPath(r.To)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.UTC().Format("2006-01-02T15:04:05.000Z"),
			ownerText(&r), r.Op, endText(r.End), kept, path)
	}
	return tw.Flush()
}

// ownerText is a change's owner in list's table: with its incarnation
// where the record holds one (session:7@4242-196df20c), as --owner takes
// it.
func ownerText(r *journal.Record) string {
	if r.OwnerStart == "" {
		return orDash(r.Owner)
	}
	return ownerarg.Join(r.Owner, r.OwnerStart)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listEntry is a change as list -o json writes it.
type listEntry struct {
	Seq      uint64          `json:"seq"`
	Time     time.Time       `json:"time"`
	Owner    string          `json:"owner"`
	Start    string          `json:"owner_start,omitempty"` // the owner's incarnation
	Session  string          `json:"session,omitempty"`
	Op       journal.Op      `json:"op"`
	Path     jsonPath        `json:"path"`
	To       jsonPath        `json:"to,omitempty"`
	End      string          `json:"end"` // done, aborted, in progress
	Kept     bool            `json:"kept"`
	Before   *journal.Object `json:"before,omitempty"`
	Replaced *journal.Object `json:"replaced,omitempty"`
	After    *journal.ID     `json:"after,omitempty"`
}

func listEntryOf(r *journal.Record) listEntry {
	return listEntry{
		Seq: r.Seq, Time: r.Time.UTC(), Owner: r.Owner, Start: r.OwnerStart, Session: r.Session, Op: r.Op,
		Path: jsonPath(r.Path), To: jsonPath(r.To), End: endText(r.End), Kept: r.Kept,
		Before: r.Before, Replaced: r.Replaced, After: r.After,
	}
}

// jsonPath is a path as the journal writes it: a string where it is
// UTF-8, else {"bytes": its base64}.
type jsonPath string

func (p jsonPath) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(p)) {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(p)); err != nil {
			return nil, err
		}
		return []byte(strings.TrimSuffix(b.String(), "\n")), nil
	}
	return json.Marshal(struct {
		Bytes string `json:"bytes"`
	}{base64.StdEncoding.EncodeToString([]byte(p))})
}
