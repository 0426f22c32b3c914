//go:build !realmtest

package main

import "github.com/realm-dev/realm/fusefs"

// testFailAt is nil outside test builds: no failure can be injected.
func testFailAt() func(fusefs.Stage) bool { return nil }

// testProfile does nothing outside test builds.
func testProfile() func() { return func() {} }

// testBeforeMkdir is nil outside test builds.
func testBeforeMkdir(string) func(string) { return nil }

// testSysfail does nothing outside test builds.
func testSysfail() error { return nil }

// testNotifyWhenBusy is false outside test builds.
func testNotifyWhenBusy() bool { return false }
