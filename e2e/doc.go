// Package e2e holds realm's end-to-end tests: they build the real binaries,
// mount for real through FUSE, and drive real programs (sh, cp, tar, git,
// sqlite3, go) through the mount.
//
// The tests need root, /dev/fuse and fusermount3 (Debian package fuse3).
// Without them they skip with the reason, except when CI=true, where a missing
// requirement is a failure. Environment knobs:
//
//	REALMFS_BIN=/path/realmfs  use this binary instead of building ./cmd/realmfs
//	REALM_E2E_RACE=1           build realmfs with -race
//	REALM_E2E_DEBUG=1          start realmfs with --debug and keep its log on failure
//
// The harness (harness_test.go) is meant to be reused by later e2e tests:
// Mount starts realmfs over a fresh BACKING at a fresh MOUNTPOINT, waits for
// /proc/self/mountinfo, and unmounts at cleanup, asserting the daemon exited 0.
// runHelper/runAs run the test binary itself in a helper mode (probe, lock
// holder, swapper) as any uid.
package e2e
