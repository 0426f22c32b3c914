// Package e2e holds realm's end-to-end tests: they build the real binaries,
// mount for real through FUSE, and drive real programs (sh, cp, tar, git,
// sqlite3, go) through the mount.
//
// The tests need root, /dev/fuse and fusermount3 (Debian package fuse3), and
// the programs they drive (sqlite3, git, python3, tar, mount.fuse3). Without
// them they skip with the reason, except when CI=true, where a missing
// requirement is a failure. Environment knobs:
//
//	REALMFS_BIN=/path/realmfs  test this binary instead of building ./cmd/realmfs
//	REALM_E2E_RACE=1           build realmfs with -race (scripts/run-e2e.sh
//	                           sets it); a race in a daemon's log fails the
//	                           test of that mount
//	REALM_E2E_DEBUG=1          start foreground mounts with --debug (the log is
//	                           printed when a test fails)
//
// The harness (harness_test.go) is meant for every e2e test of the project:
//
//   - mount(t, opts...) makes BACKING, MOUNTPOINT, an outside dir and a state
//     dir under t.TempDir(), starts realmfs (foreground by default;
//     Detached(), ViaMountFuse3(), AsUser(uid, gid), Opts(...), Flags(...),
//     Prepare(fn), RelativePaths(), Binary(bin, env...) for another build
//     such as realmtestBinary's), waits for /proc/self/mountinfo, and
//     unmounts at cleanup, asserting the daemon exited 0. Every mount, and
//     every restart, starts in Mount.start and is known to the watchdog.
//   - Mount.Unmount, Signal, Kill, KillWithin and Restart (crash tests),
//     FDCount, Audit and WaitAudit (the audit log), Path and BackingPath.
//   - Helper processes (helper_test.go) are this test binary re-executed in
//     a helper mode (helperCmd, dispatched by TestMain), and every process a
//     test keeps running starts through startProc. probe(t, cred, ops...)
//     runs file operations as any uid and reports "ok ..." or "err ENAME"
//     per operation; holdLock holds a flock, POSIX or OFD lock; holdWrite
//     holds a file open for writing; the "swap" helper is the adversary;
//     startReader and startLoop run python readers and shell loops.
package e2e
