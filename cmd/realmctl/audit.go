package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/sandbox"
)

// auditFollowPoll is how often audit --follow looks for new lines (as
// tail -f does).
const auditFollowPoll = 250 * time.Millisecond

// auditLine is one line of a mount's audit log (fusefs/audit.Event; the rotation
// marker has op "rotate" and no path). raw is the line as written.
type auditLine struct {
	Time      time.Time `json:"time"`
	Op        string    `json:"op"`
	Path      string    `json:"path"`
	Code      string    `json:"code"`
	Errno     string    `json:"errno"`
	Pid       uint32    `json:"pid"`
	Comm      string    `json:"comm"`
	Exe       string    `json:"exe"`
	Uid       uint32    `json:"uid"`
	Owner     string    `json:"owner"`
	Container string    `json:"container"`
	Rule      string    `json:"rule"`
	Repeat    int       `json:"repeat"`
	raw       []byte
}

// auditFilter is audit's selection.
type auditFilter struct {
	code, op string
	lines    int
	follow   bool
}

func (f auditFilter) match(l auditLine) bool {
	return (f.code == "" || strings.EqualFold(l.Code, f.code)) && (f.op == "" || l.Op == f.op)
}

func auditCmd(c *cli) *cobra.Command {
	var f auditFilter
	cmd := &cobra.Command{
		Use:   "audit [SESSION]",
		Short: "print (and follow) the guard's refusals on sessions' mounts",
		Long: `audit prints the audit log of a session's mount (of every mount of the state
dir without SESSION): one line per refusal, as a table, or with -o json as
the log's own JSON lines. Sessions on one workspace share its mount and so
its log. --follow goes on printing new lines until interrupted (a rotated
log is followed into its fresh file).

The table's columns: TIME, OP, CODE, ERRNO, PID, UID; PROGRAM (the
caller's comm, else its exe's name); OWNER (its lock owner: cgroup:PATH,
session:SID, pid:PID); SESSION (the session whose container the owner is,
by the records of the state dir); RULE (the credential glob or rule id
that refused it); PATH. Columns have fixed widths, so rows printed under
--follow line up with the header; a longer cell is shortened with "…" (its
tail kept for OWNER). -o wide adds EXE and shortens nothing; -o yaml prints
each line as a YAML document.`,
		Example: `  realmctl audit
  realmctl audit agent-1 -f
  realmctl audit --code CREDENTIAL_PATH_DENIED -n -1
  realmctl -o json audit agent-1`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeSessions(1),
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return 0, c.audit(ctx, args, f)
		}),
	}
	cmd.Flags().StringVar(&f.code, "code", "", "only lines with this error `CODE` (CREDENTIAL_PATH_DENIED, …)")
	cmd.Flags().StringVar(&f.op, "op", "", "only lines of this `OP` (open, rename, …)")
	cmd.Flags().IntVarP(&f.lines, "lines", "n", 50, "print the last `N` matching lines first (0: none, -1: all), as podman logs and kubectl logs count")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "go on printing new lines until interrupted")
	return cmd
}

func (c *cli) audit(ctx context.Context, args []string, f auditFilter) error {
	if len(args) > 1 {
		return usageErr("audit wants at most one session id or name")
	}
	if f.lines < -1 {
		return usageErr("--lines %d: want a count, or -1 for all", f.lines)
	}
	if f.code != "" && !errcode.Known(errcode.Code(strings.ToUpper(f.code))) {
		return usageErr("--code %s: no such code (known: %s)", f.code, codeList())
	}
	files, err := c.auditFiles(args)
	if err != nil {
		return err
	}
	var all []auditLine
	offsets := map[string]int64{}
	for _, p := range files {
		lines, off, err := readAudit(p, 0)
		if err != nil {
			return err
		}
		offsets[p] = off
		for _, l := range lines {
			if f.match(l) {
				all = append(all, l)
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
	if f.lines >= 0 && len(all) > f.lines {
		all = all[len(all)-f.lines:]
	}
	pr := newAuditPrinter(c)
	pr.header()
	for _, l := range all {
		pr.line(l)
	}
	pr.flush()
	if !f.follow {
		return nil
	}
	return c.followAudit(ctx, args, f, offsets, pr)
}

// followAudit prints the lines added to the logs from offsets on, and
// those of logs that appear, until ctx ends. A log that shrank was rotated:
// it is read again from its start.
func (c *cli) followAudit(ctx context.Context, args []string, f auditFilter, offsets map[string]int64, pr *auditPrinter) error {
	t := time.NewTicker(auditFollowPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		files, err := c.auditFiles(args)
		if err != nil {
			return err
		}
		for _, p := range files {
			off := offsets[p]
			if st, err := os.Stat(p); err == nil && st.Size() < off {
				off = 0
			}
			lines, next, err := readAudit(p, off)
			if err != nil {
				return err
			}
			offsets[p] = next
			for _, l := range lines {
				if f.match(l) {
					pr.line(l)
				}
			}
		}
		pr.flush()
	}
}

// auditFiles are the audit logs to read: the mount of the session named
// in args, or every mount's of the state dir.
func (c *cli) auditFiles(args []string) ([]string, error) {
	if len(args) == 1 {
		a, err := newApp(c.g)
		if err != nil {
			return nil, err
		}
		rec, err := a.mgr.Resolve(args[0])
		if err != nil {
			return nil, err
		}
		return []string{rec.Mount + ".audit.log"}, nil
	}
	files, err := filepath.Glob(filepath.Join(sandbox.NewMounts(c.g.stateDir, "").Dir, "*.audit.log"))
	if err != nil {
		return nil, err
	}
	return files, nil
}

// readAudit reads the whole lines of path from off on and returns them and
// the offset after the last one. A log that does not exist (yet) has none.
func readAudit(path string, off int64) ([]auditLine, int64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, off, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, off, fmt.Errorf("audit log %s: %w", path, err)
	}
	var out []auditLine
	r := bufio.NewReader(f)
	for {
		b, err := r.ReadBytes('\n')
		if err != nil { // EOF, or a line still being written: later
			if err != io.EOF {
				return out, off, fmt.Errorf("audit log %s: %w", path, err)
			}
			return out, off, nil
		}
		off += int64(len(b))
		var l auditLine
		if json.Unmarshal(b, &l) != nil {
			continue // not a line of realmfs's; skip it
		}
		l.raw = b
		out = append(out, l)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// codeList is the catalogue's codes, comma-separated, for a usage error.
func codeList() string {
	names := make([]string, len(errcode.Catalogue))
	for i, c := range errcode.Catalogue {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}
