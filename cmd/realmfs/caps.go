package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// The daemon writes every owner's bytes as root. With CAP_SYS_RESOURCE
// those writes would pass limits the host set on the workspace: ext4
// ignores a project's or a user's hard quota for a process that holds it
// (realm-csi's volume capacity), and it opens root's reserve of blocks
// (which fusefs/diskroom keeps the daemon's writes out of in any case).
// The daemon needs it for nothing: its descriptor limit is raised to the
// hard one, which takes no capability. So it sheds it before it mounts.
//
// A capability is a thread's, and Go's runtime has started several
// threads before main. So the daemon drops it from its bounding set and
// from its inheritable set, and executes itself again: exec gives root
// the bounding set (and the inheritable set) as its capabilities, for the
// one thread that then exists, from which every later thread inherits.
// syscall.AllThreadsSyscall would spare the exec but does not work in a
// binary with cgo (a -race build).

// capsShedEnv marks the exec that shed the capability: if the capability
// is still there after it, the daemon says so rather than loop.
const capsShedEnv = "_REALMFS_CAPS_SHED"

// shedResourceCap re-executes the daemon without CAP_SYS_RESOURCE if it
// holds it, and does not return then; it returns nil when there was
// nothing to shed, else why the daemon keeps it.
func shedResourceCap() error { return shedCap(unix.CAP_SYS_RESOURCE, "CAP_SYS_RESOURCE") }

// shedCap re-executes the process without capability c (called name) if
// it holds it, as shedResourceCap says.
func shedCap(c int, name string) error {
	has, err := holdsCap(c)
	if err != nil || !has {
		return err
	}
	if os.Getenv(capsShedEnv) == "1" {
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
	err = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), capsShedEnv+"=1"))
	return fmt.Errorf("execute realmfs again without %s: %w", name, err)
}

// holdsCap reports whether the calling thread has capability c in its
// effective set.
func holdsCap(c int) (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("capget: %w", err)
	}
	return data[c/32].Effective&(1<<(c%32)) != 0, nil
}
