package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/internal/rundir"
)

const auditUsageText = `Usage: realmfs audit [MOUNTPOINT|FILE] [-f] [--code CODE] [--owner OWNER] [--since TIME] [-n N] [-o json]

Print a mount's audit log (one line per refusal) as a table: TIME, OP,
CODE, ERRNO, PROGRAM (the caller's comm, else its exe's name), OWNER (its
lock owner, shortened from the left), RULE (the credential glob or rule id
that refused), PATH (a LOCK_CONFLICT line adds the holder: "held by
OWNER, pid N PROGRAM"). Columns have fixed widths, so rows printed under -f
line up with the header. -o json prints the log's own JSON lines.

MOUNTPOINT is a realmfs mount: its daemon's audit log is found through the
record each daemon keeps while mounted (/run/realmfs as root, else
$XDG_RUNTIME_DIR/realmfs). FILE is an audit log itself. Without either,
the one realmfs mount of the system.

Examples:
  realmfs audit /mnt/work
  realmfs audit /mnt/work -f --code CREDENTIAL_PATH_DENIED
  realmfs audit /var/log/realmfs/audit.jsonl --since 1h -n -1 -o json

Flags:
`

// auditCmd is what realmfs audit was asked.
type auditCmd struct {
	source string // the log file
	filter audit.Filter
	lines  int // the last N lines that pass; -1 all
	follow bool
	json   bool
}

// defaultAuditLines is -n's default: a screenful, as tail prints.
const defaultAuditLines = 50

// runAudit is realmfs audit.
func runAudit(args []string, stdout, stderr io.Writer) int {
	return auditUntil(args, stdout, stderr, nil)
}

// auditUntil is realmfs audit, following (-f) until stop is closed (nil:
// until it is killed).
func auditUntil(args []string, stdout, stderr io.Writer, stop <-chan struct{}) int {
	ac, code, ok := parseAuditArgs(args, stdout, stderr, time.Now())
	if !ok {
		return code
	}
	f, err := os.Open(ac.source)
	if err != nil {
		fmt.Fprintf(stderr, "realmfs audit: %v\n", err)
		return errcode.ExitFailure
	}
	defer f.Close()
	// The tail is the log as it stands before the header is out; what is
	// written after is followed, not taken for old and left out by -n: a
	// caller that waits for the header and then meets a refusal sees
	// its row.
	st, err := f.Stat()
	if err != nil {
		fmt.Fprintf(stderr, "realmfs audit: %v\n", err)
		return errcode.ExitFailure
	}
	p := audit.NewPrinter(stdout, ac.json)
	p.Header()
	rest, err := audit.Tail(io.LimitReader(f, st.Size()), ac.filter, ac.lines, p)
	if err != nil {
		fmt.Fprintf(stderr, "realmfs audit: %v\n", err)
		return errcode.ExitFailure
	}
	if !ac.follow {
		return 0
	}
	err = audit.Follow(f, ac.source, rest, stop, func(line []byte) { p.Print(line, ac.filter) })
	if err != nil {
		fmt.Fprintf(stderr, "realmfs audit: %v\n", err)
		return errcode.ExitFailure
	}
	return 0
}

// parseAuditArgs parses realmfs audit's command line and finds its log;
// false with the exit status when it is done (help printed, usage error).
func parseAuditArgs(args []string, stdout, stderr io.Writer, now time.Time) (auditCmd, int, bool) {
	var ac auditCmd
	usageErr := func(format string, a ...any) (auditCmd, int, bool) {
		fmt.Fprintf(stderr, "realmfs audit: "+format+" (see realmfs audit --help)\n", a...)
		return ac, errcode.ExitUsage, false
	}
	flags := auditFlags(&ac)
	var code, since, output string
	flags.StringVar(&code, "code", "", "only the lines of `CODE` (CREDENTIAL_PATH_DENIED, LOCK_CONFLICT, …)")
	flags.StringVar(&ac.filter.Owner, "owner", "", "only the lines of lock owner `OWNER` (cgroup:…, session:N, pid:N)")
	flags.StringVar(&since, "since", "", "only the lines at or after `TIME` (RFC3339, or a duration before now: 10m)")
	flags.StringVarP(&output, "output", "o", "", "`json`: the log's own JSON lines")
	if help, err := parseSubFlags(flags, auditUsageText, args, stdout); help || err != nil {
		if help {
			return ac, 0, false
		}
		return usageErr("%v", err)
	}
	if code != "" {
		c := errcode.Code(strings.ToUpper(code))
		if !errcode.Known(c) {
			return usageErr("--code %q: unknown code; the codes are %s", code, knownCodes())
		}
		ac.filter.Code = c
	}
	if since != "" {
		t, err := parseSince(since, now)
		if err != nil {
			return usageErr("--since %q: %v", since, err)
		}
		ac.filter.Since = t
	}
	switch output {
	case "":
	case "json":
		ac.json = true
	default:
		return usageErr("-o %q: want json", output)
	}
	if ac.lines < -1 {
		return usageErr("-n %d: want a number of lines, 0 none or -1 all", ac.lines)
	}
	if flags.NArg() > 1 {
		return usageErr("want one MOUNTPOINT or FILE, got %d", flags.NArg())
	}
	src, err := auditSource(flags.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "realmfs audit: %v\n", err)
		return ac, errcode.ExitUsage, false
	}
	ac.source = src
	return ac, 0, true
}

// auditFlags is realmfs audit's flag set, with the flags that need no
// parsing of their own.
func auditFlags(ac *auditCmd) *pflag.FlagSet {
	flags := pflag.NewFlagSet("realmfs audit", pflag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.BoolVarP(&ac.follow, "follow", "f", false, "go on printing lines as they are written, until interrupted")
	flags.IntVarP(&ac.lines, "lines", "n", defaultAuditLines, "print the last `N` lines (0 none: with -f only new ones; -1 all)")
	return flags
}

// knownCodes lists the codes --code takes.
func knownCodes() string {
	names := make([]string, len(errcode.Catalogue))
	for i, c := range errcode.Catalogue {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}

// auditSource is the audit log that arg names: a realmfs mountpoint's
// (its daemon's record), a file, or with no arg the one realmfs mount's.
func auditSource(arg string) (string, error) {
	if arg == "" {
		mounts, err := rundir.Mounts()
		if err != nil {
			return "", err
		}
		switch len(mounts) {
		case 0:
			return "", errors.New("no realmfs mount: give a MOUNTPOINT or the audit log FILE")
		case 1:
			arg = mounts[0].Mountpoint
		default:
			names := make([]string, len(mounts))
			for i, m := range mounts {
				names[i] = m.Mountpoint
			}
			return "", fmt.Errorf("%d realmfs mounts (%s): name one", len(mounts), strings.Join(slices.Compact(names), ", "))
		}
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return "", err
	}
	// The mountpoint as mountinfo names it: its parent's symlinks
	// resolved, without a request to the mount itself.
	mnt := abs
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		mnt = filepath.Join(dir, filepath.Base(abs))
	}
	rec, ok, err := rundir.FindRecord(mnt)
	switch {
	case err != nil:
		return "", err
	case ok && rec.AuditLog == "":
		return "", fmt.Errorf("%s: the mount keeps no audit log (no --audit-log, no audit.path in its policy)", arg)
	case ok:
		return rec.AuditLog, nil
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory but no realmfs mount: give a MOUNTPOINT or the audit log FILE", arg)
	}
	return abs, nil
}
