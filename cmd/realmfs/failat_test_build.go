//go:build realmtest

package main

import (
	"os"

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
