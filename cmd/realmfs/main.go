// Command realmfs mounts a workspace directory through realm's guarded FUSE
// filesystem. See realmfs --help.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/diskroom"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/kernelcheck"
	"github.com/realm-dev/realm/internal/capdrop"
	"github.com/realm-dev/realm/internal/gcroom"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/internal/mountwatch"
	"github.com/realm-dev/realm/policy"
	"github.com/realm-dev/realm/procinfo"
)

const usageText = `Usage: realmfs [flags] BACKING MOUNTPOINT
       realmfs journal list|diff|undo TARGET [flags]   (realmfs journal --help)
       realmfs explain [--policy FILE] PATH...          (realmfs explain --help)
       realmfs status [MOUNTPOINT...]                   (realmfs status --help)
       realmfs audit [MOUNTPOINT|FILE] [-f] [--code C]  (realmfs audit --help)

Mount the workspace directory BACKING at MOUNTPOINT through realm's guard:
every open and change from any process on the mount is resolved beneath
BACKING without following symlinks, verified against the object it expects,
and refused (EACCES, audited) when it would leave BACKING.

Without -f, realmfs detaches and returns once the mount is ready; its exit
status says whether it is, and a failure its cause. Unmount with
'fusermount3 -u MOUNTPOINT' (or umount as root), or send SIGINT/SIGTERM to
the daemon. SIGHUP reopens the audit and daemon logs (logrotate) and never
unmounts. Under systemd (Type=notify) it sends READY=1 once mounted.

MOUNTPOINT may not be BACKING or inside it; a mountpoint that is already a
mount or not empty needs -o nonempty. The audit log, the daemon log and the
policy file may not be inside BACKING either (a process on the mount could
remove or rewrite them), nor may --state-dir.

/etc/fstab:  BACKING MOUNTPOINT fuse.realmfs defaults,policy=FILE,audit_log=FILE 0 0

Exit status: 0 mounted (or clean unmount with -f), 1 runtime error, 2 usage.

Flags:
`

const optionsText = `
Mount options (-o, comma-separated):
  allow_other          let users other than the mounter use the mount
  default_permissions  accepted; always on: the kernel checks every access
                       against the mode bits, as on any filesystem
  ro                   read-only mount
  fsname=NAME          name in the first column of df/mount (default BACKING)
  subtype=NAME         accepted for compatibility; the type stays fuse.realmfs
  passthrough=on|off   serve read-only opens by kernel FUSE passthrough (default on)
  lockowner=cgroup|session|pid
                       who owns a file lock: cgroup (default: one owner per
                       container or login session scope), session (Unix
                       session id) or pid
  durability=full|atomic
                       how a close commits: full (default) fsyncs the new
                       content and the directory before and after the
                       rename; atomic renames without fsync (fsync(2) still
                       syncs); files are never torn in either mode
  policy=FILE          the -o form of --policy, for fstab lines and systemd
                       .mount units (a flag wins over its -o form, here
                       and below)
  audit_log=FILE       the -o form of --audit-log
  log=FILE             the -o form of --log
  log_format=text|json the -o form of --log-format
  state_dir=DIR|none   the -o form of --state-dir
  nonempty             mount over a non-empty directory or another mount
  debug                the -o form of -d: log every FUSE request (implies -f)
  auto_unmount         unmount when the daemon dies (killed, crashed), as
                       libfuse's: a watcher process of realmfs's own does it
  max_fds_per_owner=N  descriptors the daemon may hold for one lock owner
                       (its open files and directories, writes, locks;
                       default: half the daemon's descriptor limit, and
                       never more than half of what other owners left);
                       past it an open is EMFILE (RESOURCE_LIMIT)
  procs=N              CPUs the daemon's Go code may use at once (GOMAXPROCS;
                       default: 1 while requests come one at a time, all
                       while several wait, by fusectl's count, or while
                       the daemon fsyncs often)
  journal=on|off       record every change made through the mount, and keep
                       what it replaced or removed by link, in
                       BACKING/.realm-journal, for realmfs journal list,
                       diff and undo (default on, but on a read-only
                       mount; left off, with a warning, where it cannot
                       be opened unless asked for; docs/JOURNAL.md)
  journal_dir=DIR      the journal's directory instead: on BACKING's
                       filesystem and mount, outside BACKING
  journal_max=SIZE     bound the journal's blocks (default 1G; suffixes K M G T):
                       past it the oldest records go, with what they kept
  journal_max_files=N  bound the files it holds, segments and kept versions
                       (default a tenth of BACKING's inodes, at most 100000;
                       both pruned when the mount is idle, and passed by at
                       most half while it is busy)
  journal_keep=DURATION  bound its records' age (default 7d; 36h, 90m, 1.5d)
  watch=on|off         watch BACKING for changes made behind the mount and
                       tell the kernel to forget them (default on: fanotify
                       as root, inotify otherwise)
  entry_timeout=SECS   how long the kernel trusts a name (default 60 while
                       BACKING is watched, else 1)
  attr_timeout=SECS    how long it trusts a file's attributes (60, else 1)
  negative_timeout=SECS  how long it trusts that a name is absent (60, else 0).
                       Longer is faster (fewer round trips to the daemon);
                       unwatched, changes made in BACKING behind the mount
                       show that much later. The guard's checks never depend
                       on the cache
  Generic mount(8) options (rw, dev, suid, exec, auto, nofail, _netdev,
  x-*, ...) are accepted and ignored, so fstab lines work.
`

// version is set by the Makefile through -ldflags.
var version = ""

func main() {
	if mountwatch.IsWatcher() {
		os.Exit(mountwatch.Run(os.Args[1:], mountDevice))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usage prints the help, asked for, as sshfs and every GNU tool print it:
// to stdout, so that realmfs --help | less works; errors stay on stderr.
func usage(flags *pflag.FlagSet, stdout, stderr io.Writer) func() {
	return func() {
		flags.SetOutput(stdout)
		fmt.Fprint(stdout, usageText)
		flags.PrintDefaults()
		fmt.Fprint(stdout, optionsText)
		flags.SetOutput(stderr)
	}
}

// config is what the command line asks for.
type config struct {
	backing, mountpoint string
	foreground          bool
	debug               bool
	auditLog            string
	daemonLog           string
	stateDir            string // "none": remember nothing across mounts
	madeStore           string // the file in stateDir of BACKING's made set; "" none
	logFormat           string
	policyFile          string // "" for the built-in policy
	mount               mountOptions
	optionsGiven        []string // the -o options as given (realmfs status)
	policy              *policy.Policy
	capKept             error // why the daemon still holds capabilities outside daemonCaps (capdrop.Limit); nil: it does not
}

// subcommands are realmfs's commands other than the mount; to mount a
// directory of one of these names, write ./NAME.
var subcommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"journal": runJournal,
	"explain": runExplain,
	"audit":   runAudit,
	"status":  runStatus,
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && subcommands[args[0]] != nil {
		return subcommands[args[0]](args[1:], stdout, stderr)
	}
	flags := pflag.NewFlagSet("realmfs", pflag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		cfg         config
		opts        []string
		showVersion bool
		policyFile  string
		checkPolicy string
		showPolicy  bool
	)
	flags.BoolVarP(&cfg.foreground, "foreground", "f", false, "stay in the foreground (do not detach)")
	flags.StringSliceVarP(&opts, "options", "o", nil, "mount options, comma-separated (see below)")
	flags.StringVar(&policyFile, "policy", "", "enforce the policy in `FILE` (default: the built-in policy)")
	flags.StringVar(&checkPolicy, "check-policy", "", "validate the policy in `FILE` and exit 0 (valid) or 2")
	flags.BoolVar(&showPolicy, "show-policy", false, "print the effective policy (of --policy FILE, or the built-in one) and exit")
	flags.StringVar(&cfg.auditLog, "audit-log", "", "append one JSON line per refusal to `FILE` (default: the policy's audit.path)")
	flags.StringVar(&cfg.daemonLog, "log", "", "append the daemon's log (commits that failed at the last close, writers killed before their close, conflict copies, the mount-time sweep) to `FILE` (default: stderr, which a detached daemon has not)")
	flags.StringVar(&cfg.stateDir, "state-dir", "", "keep what the daemon remembers across mounts (the files made through the mount, which stay readable) in `DIR`, outside BACKING; none: remember nothing (default: /var/lib/realmfs as root, else $XDG_STATE_HOME/realmfs)")
	flags.StringVar(&cfg.logFormat, "log-format", "", "write the daemon log as `text` (key=value, the default) or json lines")
	flags.BoolVarP(&cfg.debug, "debug", "d", false, "log every FUSE request (implies -f)")
	flags.BoolVarP(&showVersion, "version", "V", false, "print the version and exit")
	flags.Usage = usage(flags, stdout, stderr)
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "realmfs: %v (see realmfs --help)\n", err)
		return errcode.ExitUsage
	}
	if showVersion {
		fmt.Fprintln(stdout, "realmfs", versionString())
		return 0
	}
	if checkPolicy != "" {
		if _, err := policy.Load(checkPolicy); err != nil {
			fmt.Fprintf(stderr, "realmfs: %v\n", err)
			return errcode.ExitStatusOf(err)
		}
		fmt.Fprintf(stdout, "%s: valid\n", checkPolicy)
		return 0
	}
	mo, err := parseMountOptions(opts)
	if err != nil {
		fmt.Fprintf(stderr, "realmfs: %v\n", err)
		return errcode.ExitUsage
	}
	cfg.mount, cfg.optionsGiven = mo, opts
	// Each file flag has an -o form for fstab and systemd; the flag wins.
	policyFile = cmp.Or(policyFile, mo.policyFile)
	cfg.auditLog = cmp.Or(cfg.auditLog, mo.auditLog)
	cfg.daemonLog = cmp.Or(cfg.daemonLog, mo.daemonLog)
	cfg.stateDir = cmp.Or(cfg.stateDir, mo.stateDir)
	cfg.logFormat = cmp.Or(cfg.logFormat, mo.logFormat, logText)
	if cfg.logFormat != logText && cfg.logFormat != logJSON {
		fmt.Fprintf(stderr, "realmfs: --log-format %q: want text or json\n", cfg.logFormat)
		return errcode.ExitUsage
	}
	cfg.policy = policy.Default()
	if policyFile == "" && showPolicy && flags.NArg() == 1 {
		policyFile = flags.Arg(0) // realmfs --show-policy FILE
	}
	if policyFile != "" {
		p, err := policy.Load(policyFile)
		if err != nil {
			fmt.Fprintf(stderr, "realmfs: %v\n", err)
			return errcode.ExitStatusOf(err)
		}
		cfg.policy = p
		cfg.policyFile = policyFile
	}
	if showPolicy {
		stdout.Write(cfg.policy.Render())
		return 0
	}
	if cfg.auditLog == "" {
		cfg.auditLog = cfg.policy.Audit.Path
	}
	if flags.NArg() != 2 {
		fmt.Fprintf(stderr, "realmfs: need BACKING and MOUNTPOINT, got %d arguments (see realmfs --help)\n", flags.NArg())
		return errcode.ExitUsage
	}
	if cfg.debug = cfg.debug || mo.debug; cfg.debug {
		cfg.foreground = true
	}
	if err := cfg.settlePaths(flags.Arg(0), flags.Arg(1)); err != nil {
		fmt.Fprintf(stderr, "realmfs: %v\n", err)
		return errcode.ExitUsage
	}
	if !cfg.foreground && !isDaemonChild() {
		return detach(stderr)
	}
	cfg.capKept = capdrop.Limit(daemonCaps)
	return serve(cfg, stderr)
}

// daemonCaps are the capabilities a root daemon keeps; it drops every
// other for good before it mounts (capdrop.Limit). It makes every owner's
// changes as root, so a capability it holds is one a bug of the guard
// could lend an agent on the host: CAP_MKNOD, CAP_LINUX_IMMUTABLE,
// CAP_SYS_MODULE, CAP_SYS_RESOURCE (ext4's quotas and root's reserve
// pass it) are among those it has no use for (docs/threat-model.md, (H)).
var daemonCaps = []int{
	unix.CAP_CHOWN,           // a temp gets its file's owner; an object made is handed to its caller
	unix.CAP_DAC_OVERRIDE,    // every owner's files, as the kernel's own checks (default_permissions) allowed the caller
	unix.CAP_DAC_READ_SEARCH, // open_by_handle_at (idle directories), linkat of an O_PATH fd (the journal's kept versions)
	unix.CAP_FOWNER,          // modes, times and xattrs of files the daemon does not own
	unix.CAP_FSETID,          // a directory's set-group-ID bit kept when its group is not root's
	unix.CAP_SETFCAP,         // a file capability removed (the kernel's kill of privileges on a write or truncate asks the daemon)
	unix.CAP_SYS_ADMIN,       // the mount, fanotify, passthrough's backing files, trusted.* xattrs
	unix.CAP_SYS_PTRACE,      // /proc of callers of other users: owners, the descriptor scan, the audit's exe
	unix.CAP_MAC_ADMIN,       // a security label copied onto a temp (Smack)
	unix.CAP_MAC_OVERRIDE,
}

// settlePaths makes BACKING, MOUNTPOINT and the daemon's files absolute
// (the daemon leaves the working directory for "/", so that the mount does
// not keep the caller's directory busy) and refuses the places that would
// hide, loop or give a process on the mount the daemon's files.
func (cfg *config) settlePaths(backing, mountpoint string) error {
	var err error
	if cfg.backing, err = filepath.Abs(backing); err != nil {
		return err
	}
	if cfg.mountpoint, err = filepath.Abs(mountpoint); err != nil {
		return err
	}
	for _, p := range []*string{&cfg.auditLog, &cfg.daemonLog, &cfg.policyFile, &cfg.stateDir, &cfg.mount.journalDir} {
		if *p == "" || *p == stateNone {
			continue
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if err := checkDirs(cfg.backing, cfg.mountpoint); err != nil {
		return err
	}
	if err := checkMountpoint(cfg.backing, cfg.mountpoint, cfg.mount.nonempty); err != nil {
		return err
	}
	explicitState := cfg.stateDir
	if explicitState == stateNone {
		explicitState = ""
	}
	if err := checkOutside(cfg.backing, map[string]string{"audit log": cfg.auditLog, "log": cfg.daemonLog,
		"policy file": cfg.policyFile, "state directory": explicitState, "journal directory": cfg.mount.journalDir}); err != nil {
		return err
	}
	cfg.madeStore = madeStorePath(cfg.stateDir, cfg.backing)
	return nil
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

func checkDirs(backing, mountpoint string) error {
	for _, d := range []struct{ role, path string }{{"backing directory", backing}, {"mountpoint", mountpoint}} {
		st, err := os.Stat(d.path)
		if err != nil {
			return fmt.Errorf("%s: %w", d.role, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("%s %s is not a directory", d.role, d.path)
		}
	}
	return nil
}

// ownerResolver names the owners of callers as -o lockowner says, for the
// lock table and the audit log's lines.
func ownerResolver(cfg config, auditor *audit.Auditor) *procinfo.Resolver {
	owners := procinfo.NewResolver(cfg.mount.lockOwner, "/proc")
	if auditor != nil {
		auditor.Owner = func(pid uint32) string {
			o, _ := owners.Owner(pid)
			return string(o)
		}
	}
	return owners
}

// serve mounts and runs the filesystem until it is unmounted or signalled.
func serve(cfg config, stderr io.Writer) int {
	// Signals are caught from the start: one that arrives once the mount
	// is in mountinfo but before the handler below runs must unmount, not
	// kill the daemon and leave the mount dead. They wait in the channel.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	limit := setupProcess(cfg.mount)
	var logger *slog.Logger
	fail := func(format string, args ...any) int {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintf(stderr, "realmfs: %s\n", msg)
		if logger != nil && cfg.daemonLog != "" {
			logger.Error("mount failed", "mountpoint", cfg.mountpoint, "err", msg)
		}
		notifyParent(msg)
		return errcode.ExitFailure
	}
	logs, err := openLogs(cfg, stderr)
	logger = logs.logger
	defer logs.close()
	if err != nil {
		return fail("%v", err)
	}
	// Built with -tags lockdep, a lock taken out of order is an error here.
	lockorder.SetReporter(func(report string) { logger.Error("lock order violated", "report", report) })
	auditor, reopen := logs.audit, logs.files
	if err := checkKernel(); err != nil {
		return fail("%v", err)
	}
	owners := ownerResolver(cfg, auditor)
	defer owners.Close()
	// BACKING is opened once: the mount, its journal and the undo the
	// control socket runs are all beneath this descriptor, whatever a host
	// process puts at BACKING's path from here on.
	root, err := dirfd.OpenRoot(cfg.backing)
	if err != nil {
		return fail("%v", err)
	}
	defer dirfd.Close(root)
	room := diskroom.ForRoot(root, os.Geteuid() == 0) // BACKING's room: the mount's writes and the journal's records
	jnl, jpruner, err := openJournal(cfg, root, room, logger)
	if err != nil {
		return fail("%v", err)
	}
	defer closeJournal(jnl, jpruner, logger)
	fsys, err := fusefs.NewAt(root, cfg.backing, fsOptions(cfg, auditor, owners, limit, logger, jnl, room))
	if err != nil {
		return fail("%v", err)
	}
	defer fsys.Close()
	jpruner.paceBy(fsys.Requests)
	fopts := fsys.MountOptions(fuseOptions(cfg, logger))
	// mountinfo names the mountpoint with symlinks resolved; resolving it
	// once mounted would ask this daemon.
	realMountpoint, err := filepath.EvalSymlinks(cfg.mountpoint)
	if err != nil {
		return fail("mountpoint: %v", err)
	}
	server, err := fsys.Mount(cfg.mountpoint, fopts)
	if err != nil {
		return fail("mount %s: %v", cfg.mountpoint, err)
	}
	dev, devKnown := settleMount(fsys, server, cfg, realMountpoint, logger)
	defer recordMount(cfg, realMountpoint, logger)()
	defer gcroom.Start(logger)()
	defer adaptProcs(fsys, dev, cfg.mount.procs > 0 || !devKnown, logger)()
	if devKnown {
		mountwatch.Start(realMountpoint, dev, cfg.mount.autoUnmount, logger)
	} else if cfg.mount.autoUnmount {
		logger.Warn("auto_unmount: no watcher: the mount's device number is unknown")
	}
	control, stopControl := startControl(cfg, root, dev, devKnown, jnl, fsys, logger)
	defer stopControl()
	go handleSignals(sigs, server, cfg.mountpoint, func() { reopenLogs(reopen, auditor, logger) }, logger, stderr)
	fsys.ScanInBackground(func(res fusefs.ScanResult) {
		control.swept(res)
		level := slog.LevelInfo
		if res.Err != nil {
			level = slog.LevelError
		}
		logger.Log(context.Background(), level, "sweep done", "entries", res.Entries, "credentials", res.Credentials,
			"crash_temps_removed", res.TempRemoved, "err", res.Err)
	})
	if err := testSysfail(); err != nil {
		server.Unmount()
		return fail("%v", err)
	}
	stopProfile := testProfile()
	logger.Info("mounted", "backing", cfg.backing, "mountpoint", cfg.mountpoint, "version", versionString(),
		"pid", os.Getpid(), "procs", runtime.GOMAXPROCS(0), "passthrough", fsys.Passthrough(), "allow_other", cfg.mount.allowOther, "read_only", cfg.mount.readOnly,
		"policy", cmp.Or(cfg.policyFile, "built-in"), "audit_log", cfg.auditLog, "made_store", cmp.Or(cfg.madeStore, "none"))
	notifyParent("")
	sdNotify("READY=1")
	server.Wait()
	stopProfile()
	logger.Info("unmounted", "mountpoint", cfg.mountpoint)
	return 0
}

// settleMount finishes what a mount needs once it is in place: the
// notifier's own thread, the mount's device number (returned, with
// whether it is known), the notes logged.
func settleMount(fsys *fusefs.FS, server *fuse.Server, cfg config, realMountpoint string, logger *slog.Logger) (uint64, bool) {
	if err := fsys.IsolateNotifier(); err != nil {
		logger.Warn("invalidations are written on a shared thread: a daemon killed while one waits for a directory may hang the mount until its connection is aborted", "err", err)
	}
	// The mount's device number, from mountinfo: a stat of the mountpoint
	// would be a request to this very daemon, and a SIGKILL while it waits
	// in the kernel for the answer (read, not yet written) leaves the
	// process unable to die until its connection is aborted.
	dev, err := mountDevice(realMountpoint)
	if err == nil {
		fsys.SetMountDevice(dev)
	} else {
		logger.Warn("the mount's device number is unknown", "mountpoint", cfg.mountpoint, "err", err)
	}
	logMountNotes(fsys, server, cfg, logger)
	return dev, err == nil
}

// checkKernel refuses a kernel realmfs cannot guard on (kernelcheck).
func checkKernel() error {
	var uts unix.Utsname
	if unix.Uname(&uts) != nil {
		return nil
	}
	return kernelcheck.Check(unix.ByteSliceToString(uts.Release[:]))
}

// fuseOptions are go-fuse's mount options for cfg, before the guard adds
// its own (FS.MountOptions).
func fuseOptions(cfg config, logger *slog.Logger) fuse.MountOptions {
	return fuse.MountOptions{
		AllowOther: cfg.mount.allowOther,
		FsName:     cmp.Or(cfg.mount.fsname, cfg.backing),
		Name:       "realmfs",
		Options:    cfg.mount.kernelOptions(),
		Debug:      cfg.debug,
		Logger:     fuseLogger(logger),
	}
}

// daemonLogs are the daemon's logs: its own (stderr, or a file), and the
// audit log; the files are those SIGHUP reopens (logrotate's postrotate,
// a supervisor).
type daemonLogs struct {
	logger *slog.Logger // nil if the daemon log could not be opened
	files  []*logFile
	audit  *audit.Auditor // nil: no audit log
	path   string         // the audit log's
}

// openLogs opens the logs cfg names. On error what was opened is in the
// result, to log the failure and to close.
func openLogs(cfg config, stderr io.Writer) (*daemonLogs, error) {
	l := &daemonLogs{}
	var daemonOut io.Writer = stderr
	if cfg.daemonLog != "" {
		lf, err := openLog(cfg.daemonLog)
		if err != nil {
			return l, fmt.Errorf("log: %w", err)
		}
		l.files = append(l.files, lf)
		daemonOut = lf
	}
	l.logger = newDaemonLogger(daemonOut, cfg.logFormat, cfg.debug)
	if cfg.auditLog != "" {
		a, err := audit.Open(cfg.auditLog, audit.MaxSize)
		if err != nil {
			return l, fmt.Errorf("audit log: %w", err)
		}
		a.Logf = warnf(l.logger)
		l.audit, l.path = a, cfg.auditLog
	}
	return l, nil
}

// close closes the logs, the audit log first, once the daemon log has
// said how many audit lines were lost.
func (l *daemonLogs) close() {
	if a := l.audit; a != nil {
		if n := a.Failed(); n > 0 {
			l.logger.Error("audit lines lost", "audit_log", l.path, "lines", n)
		}
		a.Close()
	}
	for _, lf := range l.files {
		lf.Close()
	}
}

// fsOptions are the guard's options for cfg: the audit log (nil: none),
// the owners' resolver, the descriptor limit in force, the daemon log and
// the journal of changes (nil: none).
func fsOptions(cfg config, auditor *audit.Auditor, owners *procinfo.Resolver, limit uint64, logger *slog.Logger, jnl *journal.Journal, room *diskroom.Gauge) fusefs.Options {
	isRoot := os.Geteuid() == 0
	return fusefs.Options{
		ReadOnly:       cfg.mount.readOnly,
		Passthrough:    cfg.mount.passthrough && isRoot,
		ChownToCaller:  isRoot && cfg.mount.allowOther,
		Audit:          auditor,
		Credentials:    cfg.policy.Matcher(),
		Owners:         owners,
		Durability:     cfg.mount.durability,
		Journal:        jnl,
		Room:           room,
		Cache:          &cfg.mount.cache,
		NoWatch:        !cfg.mount.watch,
		MaxFdsPerOwner: maxFdsPerOwner(cfg.mount.maxFds, limit),
		FdLimit:        fdLimit(limit),
		MadeStore:      cfg.madeStore,
		Logf:           warnf(logger),
		Debugf:         debugf(logger),
		BeforeMkdir:    testBeforeMkdir(cfg.backing),
		FailAt:         testFailAt(),
		NotifyWhenBusy: testNotifyWhenBusy(),
	}
}

// handleSignals serves the daemon's signals: SIGINT and SIGTERM unmount;
// SIGHUP only reopens the logs (reopen): a mount never dies of the signal
// logrotate and supervisors send.
func handleSignals(sigs <-chan os.Signal, server *fuse.Server, mountpoint string, reopen func(), logger *slog.Logger, stderr io.Writer) {
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			reopen()
			continue
		}
		logger.Info("unmounting", "mountpoint", mountpoint, "signal", sig.String())
		sdNotify("STOPPING=1")
		if err := server.Unmount(); err != nil {
			logger.Error("unmount failed", "mountpoint", mountpoint, "err", err)
			fmt.Fprintf(stderr, "realmfs: unmount: %v\n", err)
		}
	}
}

// reopenLogs reopens the daemon's log files and the audit log (nil: none)
// under their names, and says how many it reopened.
func reopenLogs(logs []*logFile, auditor *audit.Auditor, logger *slog.Logger) {
	n := 0
	for _, lf := range logs {
		if err := lf.Reopen(); err != nil {
			logger.Error("SIGHUP: log not reopened", "err", err)
		} else {
			n++
		}
	}
	if auditor != nil {
		if err := auditor.Reopen(); err != nil {
			logger.Error("SIGHUP: audit log not reopened", "err", err)
		} else {
			n++
		}
	}
	logger.Info("SIGHUP: logs reopened", "files", n)
}

// logMountNotes logs what the mount could not have as asked: the kernel
// cache in effect when nothing watches BACKING (or with --debug), and
// what the kernel lacks.
func logMountNotes(fsys *fusefs.FS, server *fuse.Server, cfg config, logger *slog.Logger) {
	if c, how := fsys.CacheInEffect(), fsys.Watching(); cfg.debug || how == "" && cfg.mount.watch {
		logger.Info("kernel cache", "entries", c.Entry, "attributes", c.Attr, "absent_names", c.Negative, "watched_by", how)
	}
	for _, note := range kernelcheck.Notes(server.KernelSettings()) {
		logger.Info("note: " + note)
	}
	if cfg.capKept != nil {
		logger.Warn("the daemon keeps capabilities it does not need (its writes may pass the file system's quotas)", "err", cfg.capKept)
	}
}

// maxFdsPerOwner is the bound of the descriptors the daemon holds per
// lock owner: the max_fds_per_owner option, else half the daemon's
// descriptor limit (fusefs's budget for all owners, FdLimit, bounds each
// owner tighter still: half of what the others left of the limit less
// the daemon's reserve). 0 (no bound) if the limit is
// unknown or too large to matter.
func maxFdsPerOwner(opt int, limit uint64) int {
	if opt > 0 {
		return opt
	}
	return fdLimit(limit) / 2
}

// fdLimit is the daemon's descriptor limit as fusefs.Options.FdLimit
// takes it: 0 (no budget for all owners together) if unknown or too large
// to matter, as for maxFdsPerOwner.
func fdLimit(limit uint64) int {
	if limit == 0 || limit >= 1<<30 {
		return 0
	}
	return int(limit)
}
