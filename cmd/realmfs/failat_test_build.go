//go:build realmtest

package main

import (
	"os"
	"runtime/pprof"

	"realm/fusefs"
)

// testFailAt, in binaries built with -tags realmtest for the e2e suite,
// fails every commit at the stage named by REALMFS_FAIL_AT.
func testFailAt() func(fusefs.Stage) bool {
	stage := fusefs.Stage(os.Getenv("REALMFS_FAIL_AT"))
	if stage == "" {
		return nil
	}
	return func(s fusefs.Stage) bool { return s == stage }
}

// testProfile, in test builds, writes a CPU profile of the daemon's whole
// life to REALMFS_CPUPROFILE (for finding where a benchmark's time goes).
// The returned function stops it once the server has stopped.
func testProfile() func() {
	path := os.Getenv("REALMFS_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
