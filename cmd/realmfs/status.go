package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/spf13/pflag"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/fusefs/journal/diff"
	"github.com/realm-dev/realm/internal/rundir"
)

const statusUsageText = `Usage: realmfs status [MOUNTPOINT...] [-o json]

List the realmfs mounts (from /proc/self/mountinfo), or the ones named, each
with what its daemon says through its control socket: its pid, uptime and
version, BACKING, the -o options, the policy, the audit log, the journal,
the mount-time sweep (running, or what it found), the refusals so far, the
open handles per owner (counted where max_fds_per_owner bounds them), and
the write locks: each file's path, its owner, write or append, its open
handles, and whether it has bytes not yet committed. Only root and the
daemon's user get an answer (the socket is theirs: /run/realmfs for root's
daemons, $XDG_RUNTIME_DIR/realmfs for a user's).

Exit status: 0; 1 if a mount named is none or its daemon does not answer
(listing every mount, one whose daemon does not answer is listed so); 2 for
bad input.

Examples:
  realmfs status
  realmfs status /mnt/work -o json

Flags:
`

// daemonStatus is what a daemon says of its mount.
type daemonStatus struct {
	Mountpoint string    `json:"mountpoint"`
	Backing    string    `json:"backing"`
	Pid        int       `json:"pid"`
	Version    string    `json:"version"`
	Started    time.Time `json:"started"`
	Options    string    `json:"options"`
	Policy     string    `json:"policy"`
	AuditLog   string    `json:"audit_log,omitempty"`
	Log        string    `json:"log,omitempty"`
	Journal    string    `json:"journal"` // off, or its directory
	// Sweep: the mount-time scan's result; nil while it runs.
	Sweep *sweepStatus `json:"sweep,omitempty"`
	fusefs.MountStatus
}

type sweepStatus struct {
	Entries      int    `json:"entries"`
	Credentials  int    `json:"credentials"`
	TempsRemoved int    `json:"crash_temps_removed"`
	Err          string `json:"error,omitempty"`
}

// status is the daemon's answer to status.
func (c *controller) status() daemonStatus {
	st := daemonStatus{Mountpoint: c.cfg.mountpoint, Backing: c.cfg.backing, Pid: os.Getpid(), Version: versionString(),
		Started: c.started.UTC(), Options: strings.Join(c.cfg.optionsGiven, ","), Policy: cmp.Or(c.cfg.policyFile, "built-in"),
		AuditLog: c.cfg.auditLog, Log: c.cfg.daemonLog, Journal: "off", MountStatus: c.fsys.Status()}
	if c.j != nil {
		st.Journal = cmp.Or(c.cfg.mount.journalDir, filepath.Join(c.cfg.backing, ".realm-journal"))
	}
	slices.SortFunc(st.Locks, func(a, b fusefs.LockStatus) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Owner, b.Owner))
	})
	c.sweep.Lock()
	if r := c.sweep.res; r != nil {
		st.Sweep = &sweepStatus{Entries: r.Entries, Credentials: r.Credentials, TempsRemoved: r.TempRemoved}
		if r.Err != nil {
			st.Sweep.Err = r.Err.Error()
		}
	}
	c.sweep.Unlock()
	return st
}

// runStatus runs `realmfs status` (args after "status").
func runStatus(args []string, stdout, stderr io.Writer) int {
	flags := pflag.NewFlagSet("realmfs status", pflag.ContinueOnError)
	var output string
	flags.StringVarP(&output, "output", "o", "", "`json`: one JSON object per mount")
	if help, err := parseSubFlags(flags, statusUsageText, args, stdout); help || err != nil {
		if help {
			return 0
		}
		fmt.Fprintf(stderr, "realmfs status: %v (see realmfs status --help)\n", err)
		return errcode.ExitUsage
	}
	if output != "" && output != "json" {
		fmt.Fprintf(stderr, "realmfs status: -o %q: only -o json (see realmfs status --help)\n", output)
		return errcode.ExitUsage
	}
	mnts, code := statusTargets(flags.Args(), stderr)
	for _, mnt := range mnts {
		reply, err := askDaemon(mnt, controlRequest{Op: "status"})
		if err != nil && len(flags.Args()) == 0 {
			// Listing every mount: one whose daemon does not answer (dead,
			// unmounting, or of a realmfs with no control socket) is
			// listed as such, and the others still reported.
			fmt.Fprintf(stdout, "%s: the daemon does not answer: %v\n", mnt, err)
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "realmfs status: %s: %v\n", mnt, err)
			code = errcode.ExitFailure
			continue
		}
		if output == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(reply.Status)
			continue
		}
		writeStatus(stdout, reply.Status)
	}
	return code
}

// statusTargets are the mountpoints status reports: those named (each a
// realmfs mount, else an error), or every realmfs mount.
func statusTargets(args []string, stderr io.Writer) ([]string, int) {
	if len(args) == 0 {
		mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("fuse.realmfs"))
		if err != nil {
			fmt.Fprintf(stderr, "realmfs status: %v\n", err)
			return nil, errcode.ExitFailure
		}
		var out []string
		for _, m := range mounts {
			out = append(out, m.Mountpoint)
		}
		slices.Sort(out)
		return out, 0
	}
	var out []string
	code := 0
	for _, a := range args {
		abs, err := filepath.Abs(a)
		if err == nil {
			if real, rerr := filepath.EvalSymlinks(abs); rerr == nil {
				abs = real
			}
			_, ok, merr := rundir.MountAt(abs)
			if merr == nil && !ok {
				merr = errors.New("not a realmfs mount")
			}
			err = merr
		}
		if err != nil {
			fmt.Fprintf(stderr, "realmfs status: %s: %v\n", a, err)
			code = errcode.ExitFailure
			continue
		}
		out = append(out, abs)
	}
	return out, code
}

// writeStatus writes one mount's status as text.
func writeStatus(w io.Writer, st *daemonStatus) {
	fmt.Fprintf(w, "%s: pid %d, up %s, realmfs %s\n", st.Mountpoint, st.Pid, time.Since(st.Started).Round(time.Second), st.Version)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	row("backing", st.Backing)
	row("options", cmp.Or(st.Options, "(none)"))
	row("policy", st.Policy)
	row("audit log", cmp.Or(st.AuditLog, "(none)"))
	row("journal", st.Journal)
	switch s := st.Sweep; {
	case s == nil:
		row("sweep", fmt.Sprintf("running: %d entries so far", st.Scanned))
	case s.Err != "":
		row("sweep", "failed: "+s.Err)
	default:
		row("sweep", fmt.Sprintf("done: %d entries, %d credentials, %d crash temps removed", s.Entries, s.Credentials, s.TempsRemoved))
	}
	if st.AuditLog == "" {
		row("refusals", "not counted (no audit log)")
	} else {
		row("refusals", fmt.Sprint(st.Refusals))
	}
	var owners []string
	for o, n := range st.Handles {
		owners = append(owners, fmt.Sprintf("%s %d", o, n))
	}
	slices.Sort(owners)
	row("handles", cmp.Or(strings.Join(owners, ", "), "(none counted)"))
	row("write locks", fmt.Sprint(len(st.Locks)))
	tw.Flush()
	if len(st.Locks) == 0 {
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    PATH\tOWNER\tMODE\tHANDLES\tUNCOMMITTED")
	for _, l := range st.Locks {
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%d\t%v\n", diff.ShowPath(cmp.Or(l.Path, "?")), l.Owner, l.Mode, l.Handles, l.Uncommitted)
	}
	tw.Flush()
}
