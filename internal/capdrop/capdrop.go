// Package capdrop sheds a capability from a process for good, all its
// threads included.
package capdrop

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// A capability is a thread's, and Go's runtime has started several
// threads before main. So Shed drops it from the bounding set and from the
// inheritable set, and executes the program again: exec gives root the
// bounding set (and the inheritable set) as its capabilities, for the one
// thread that then exists, from which every later thread inherits.
// syscall.AllThreadsSyscall would spare the exec but does not work in a
// binary with cgo (a -race build).

// shedEnv marks the exec that shed the capability: if the capability is
// still there after it, Shed says so rather than loop.
const shedEnv = "_REALM_CAPS_SHED"

// Shed executes the program again (/proc/self/exe, the same arguments and
// environment) without capability c (called name) if it holds it, and
// does not return then; it returns nil when there was nothing to shed,
// else why the process keeps it. Call it before the program opens
// anything an exec would close or leak.
func Shed(c int, name string) error {
	has, err := Holds(c)
	if err != nil || !has {
		return err
	}
	if os.Getenv(shedEnv) == "1" {
		return fmt.Errorf("%s is still held after it was dropped", name)
	}
	runtime.LockOSThread() // the drops and the exec on one thread: it is that thread's set that exec reads
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
		return fmt.Errorf("drop %s from the bounding set: %w", name, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[c/32].Inheritable &^= 1 << (c % 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop %s from the inheritable set: %w", name, err)
	}
	// /proc/self/exe is the running binary even if its path was replaced
	// since (an upgrade under a running mount).
	err = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), shedEnv+"=1"))
	return fmt.Errorf("execute the program again without %s: %w", name, err)
}

// Holds reports whether the calling thread has capability c in its
// effective set.
func Holds(c int) (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("capget: %w", err)
	}
	return data[c/32].Effective&(1<<(c%32)) != 0, nil
}
