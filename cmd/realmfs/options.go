package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/procinfo"
)

// mountOptions are the -o options realmfs understands.
type mountOptions struct {
	allowOther  bool
	readOnly    bool
	passthrough bool
	fsname      string
	lockOwner   procinfo.OwnerMode
	durability  fusefs.Durability
	cache       fusefs.CacheTimeouts // negative: the default
	watch       bool
	nonempty    bool // mount over a non-empty directory or another mount
	// The -o forms of --policy, --audit-log, --log and --log-format, so
	// fstab lines and systemd .mount units configure a guard.
	policyFile string
	auditLog   string
	daemonLog  string
	logFormat  string
	stateDir   string // the -o form of --state-dir
	maxFds     int    // max_fds_per_owner; 0: half the daemon's descriptor limit
	procs      int    // procs: the daemon's GOMAXPROCS; 0: adapted (process.go, internal/adaptprocs)
	journal    bool   // record every change made through the mount (default on)
	// journalAsked: -o journal=on or journal_dir was given, so a journal
	// that cannot be opened fails the mount instead of being left off.
	journalAsked bool
	journalDir   string // the journal's directory; "": BACKING/.realm-journal
	// The journal's bounds: its segments' and kept versions' blocks, the
	// files they are (0: a share of BACKING's inodes), and their age
	// (journal_max, journal_max_files, journal_keep; journalbounds.go).
	journalMax      int64
	journalMaxFiles int64
	journalKeep     time.Duration

	// sshfs habits: -o debug is -d; auto_unmount unmounts when the
	// daemon dies (internal/mountwatch).
	debug, autoUnmount bool
}

// unsetCache leaves every timeout to the default for how BACKING is watched.
var unsetCache = fusefs.CacheTimeouts{Entry: -1, Attr: -1, Negative: -1}

// maxCacheTimeout bounds the cache timeouts: past an hour, a change made in
// the backing dir would stay unseen for longer than anyone expects.
const maxCacheTimeout = time.Hour

// parseTimeout reads a libfuse-style timeout in seconds ("1", "0.5").
func parseTimeout(key, val string) (time.Duration, error) {
	secs, err := strconv.ParseFloat(val, 64)
	if err != nil || math.IsNaN(secs) || secs < 0 || secs > maxCacheTimeout.Seconds() {
		return 0, badValue(key, val, fmt.Sprintf("want seconds from 0 to %d", int(maxCacheTimeout.Seconds())))
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// genericOptions are mount(8)'s own options, which fstab and mount.fuse3
// pass along; they mean nothing to a FUSE daemon and are accepted silently.
var genericOptions = map[string]bool{
	"rw": true, "defaults": true, "dev": true, "nodev": true, "suid": true, "nosuid": true,
	"exec": true, "noexec": true, "auto": true, "noauto": true, "user": true, "nouser": true,
	"users": true, "owner": true, "group": true, "async": true, "sync": true, "atime": true,
	"noatime": true, "relatime": true, "norelatime": true, "strictatime": true, "lazytime": true,
	"nodiratime": true, "diratime": true, "_netdev": true, "nofail": true, "silent": true, "loud": true,
}

// onOff reads the value of a -o key=on|off option.
func onOff(key, val string) (bool, error) {
	switch val {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, badValue(key, val, "want on or off")
}

// parseMountOptions reads -o values as sshfs and bindfs take them: each
// value is a comma-separated list, and -o may repeat.
func parseMountOptions(values []string) (mountOptions, error) {
	mo := mountOptions{passthrough: true, watch: true, cache: unsetCache, journal: true, journalMax: defaultJournalMax, journalKeep: defaultJournalKeep}
	var err error
	for _, v := range values {
		for _, opt := range strings.Split(v, ",") {
			opt = strings.TrimSpace(opt)
			key, val, hasVal := strings.Cut(opt, "=")
			switch {
			case opt == "":
			case key == "allow_other" && !hasVal:
				mo.allowOther = true
			case key == "default_permissions" && !hasVal:
				// Always on (kernelOptions); accepted for fstab lines.
			case key == "ro" && !hasVal:
				mo.readOnly = true
			case key == "fsname" && hasVal && val != "":
				mo.fsname = val
			case key == "subtype" && hasVal:
			case key == "nonempty" && !hasVal:
				mo.nonempty = true
			case key == "debug" && !hasVal:
				mo.debug = true
			case key == "auto_unmount" && !hasVal:
				mo.autoUnmount = true
			case key == "policy" && hasVal && val != "":
				mo.policyFile = val
			case key == "audit_log" && hasVal && val != "":
				mo.auditLog = val
			case key == "log" && hasVal && val != "":
				mo.daemonLog = val
			case key == "state_dir" && hasVal && val != "":
				mo.stateDir = val
			case key == "log_format" && hasVal:
				if val != logText && val != logJSON {
					return mo, badValue(key, val, "want text or json")
				}
				mo.logFormat = val
			case key == "passthrough" && hasVal:
				if mo.passthrough, err = onOff(key, val); err != nil {
					return mo, err
				}
			case key == "journal" || strings.HasPrefix(key, "journal_"):
				if err := mo.setJournal(key, val, hasVal); err != nil {
					return mo, err
				}
			case key == "watch" && hasVal:
				if mo.watch, err = onOff(key, val); err != nil {
					return mo, err
				}
			case key == "lockowner" && hasVal:
				m, err := procinfo.ParseOwnerMode(val)
				if err != nil {
					return mo, badValue(key, val, "want cgroup, session or pid")
				}
				mo.lockOwner = m
			case key == "durability" && hasVal:
				switch val {
				case "full":
					mo.durability = fusefs.DurabilityFull
				case "atomic":
					mo.durability = fusefs.DurabilityAtomic
				default:
					return mo, badValue(key, val, "want full or atomic")
				}
			case (key == "entry_timeout" || key == "attr_timeout" || key == "negative_timeout") && hasVal:
				d, err := parseTimeout(key, val)
				if err != nil {
					return mo, err
				}
				switch key {
				case "entry_timeout":
					mo.cache.Entry = d
				case "attr_timeout":
					mo.cache.Attr = d
				default:
					mo.cache.Negative = d
				}
			case key == "max_fds_per_owner" && hasVal:
				if mo.maxFds, err = wholeNumber(key, val, math.MaxInt32, "want a number of open files, at least 1"); err != nil {
					return mo, err
				}
			case key == "procs" && hasVal:
				if mo.procs, err = wholeNumber(key, val, 1024, "want how many CPUs the daemon's Go code may use at once, 1 to 1024"); err != nil {
					return mo, err
				}
			case genericOptions[key] && !hasVal, strings.HasPrefix(key, "x-"), key == "comment":
			default:
				return mo, misused(key, val, hasVal)
			}
		}
	}
	return mo, nil
}

// wholeNumber reads a whole number from 1 to most; want says what it is.
func wholeNumber(key, val string, most int, want string) (int, error) {
	n, err := strconv.Atoi(val)
	if err != nil || n < 1 || n > most {
		return 0, badValue(key, val, want)
	}
	return n, nil
}

// setJournal sets a journal option: journal, journal_dir, journal_max,
// journal_max_files or journal_keep.
func (mo *mountOptions) setJournal(key, val string, hasVal bool) error {
	var err error
	switch {
	case key == "journal" && hasVal:
		mo.journal, err = onOff(key, val)
		mo.journalAsked = mo.journal
	case key == "journal_dir" && hasVal && val != "":
		mo.journalDir, mo.journalAsked = val, true
	case key == "journal_max" && hasVal:
		mo.journalMax, err = parseSize(key, val)
	case key == "journal_max_files" && hasVal:
		mo.journalMaxFiles, err = parseFiles(key, val)
	case key == "journal_keep" && hasVal:
		mo.journalKeep, err = parseKeep(key, val)
	default:
		err = misused(key, val, hasVal)
	}
	return err
}

// kernelOptions are the options handed to the kernel mount. The kernel
// always checks permissions against the modes the mount reports
// (default_permissions): the daemon checks none itself (it opens every
// file read-only and writes a temp, so without the kernel's check a
// process could write a file whose mode forbids it), and the kernel then
// never sends ACCESS.
func (mo mountOptions) kernelOptions() []string {
	o := []string{"default_permissions"}
	if mo.readOnly {
		o = append(o, "ro")
	}
	return o
}
