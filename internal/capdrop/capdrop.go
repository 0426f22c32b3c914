// Package capdrop limits a process, all its threads included, to an
// allowlist of capabilities, for good.
//
// A capability is a thread's, and Go's runtime has started several
// threads before main. So Limit drops every other capability from the
// bounding set and from the inheritable set, and executes the program
// again: exec gives root the bounding set (and the inheritable set) as its
// capabilities, for the one thread that then exists, from which every
// later thread inherits, and no later exec can bring a dropped one back.
// syscall.AllThreadsSyscall would spare the exec but does not work in a
// binary with cgo (a -race build).
package capdrop

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// limitedEnv marks the exec that limited the capabilities: if one outside
// the allowlist is still held after it, Limit says so rather than loop.
const limitedEnv = "_REALM_CAPS_LIMITED"

// nameEnv carries the process's name (comm) across an exec of
// /proc/self/exe, which would name it "exe": a check of a pid's program
// (realmfs audit MOUNTPOINT, ps, pkill) would not know it.
const nameEnv = "_REALM_CAPS_NAME"

// init gives the process back the name nameEnv carries. In init, since
// the main goroutine runs on the main thread until main starts, and
// /proc/PID/comm is the main thread's name.
func init() {
	if name := os.Getenv(nameEnv); name != "" {
		os.Unsetenv(nameEnv) // not for the programs the process runs
		if p, err := unix.BytePtrFromString(name); err == nil {
			unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
		}
	}
}

// Limit executes the program again (its own binary, the same arguments
// and environment) holding no capability outside keep, if it holds one,
// and does not return then; it returns nil when it held none (a process
// that is not root holds none), else why it keeps them. Call it before
// the program opens anything an exec would close or leak.
func Limit(keep []int) error {
	extra, err := outside(keep)
	if err != nil || len(extra) == 0 {
		return err
	}
	if os.Getenv(limitedEnv) == "1" {
		return fmt.Errorf("capabilities %v are still held after they were dropped", extra)
	}
	runtime.LockOSThread() // the drops and the exec on one thread: it is that thread's sets that exec reads
	defer runtime.UnlockOSThread()
	for c := range lastCap() + 1 {
		if slices.Contains(keep, c) {
			continue
		}
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err != nil || in == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	hdr, data, err := capget()
	if err != nil {
		return err
	}
	for i := range data {
		data[i].Inheritable &= maskWord(keep, i)
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities from the inheritable set: %w", err)
	}
	// By its path, so that the process keeps its name (comm, which ps and
	// a check of a pid's program read, is the base name of the path
	// executed), unless the file at that path is no longer the running
	// binary (removed, or replaced by an upgrade): then /proc/self/exe,
	// and the name is carried across (nameEnv, init).
	env := append(os.Environ(), limitedEnv+"=1")
	path := runningBinary()
	if path == selfExe {
		if comm, err := os.ReadFile("/proc/self/comm"); err == nil {
			env = append(env, nameEnv+"="+strings.TrimSuffix(string(comm), "\n"))
		}
	}
	err = syscall.Exec(path, os.Args, env)
	return fmt.Errorf("execute the program again with its capabilities limited: %w", err)
}

// selfExe is the running binary whatever became of its path.
const selfExe = "/proc/self/exe"

// runningBinary is the path of the running binary if that path still
// leads to it, else selfExe. (os.Executable cuts the " (deleted)" the
// kernel appends to a removed binary's path: it cannot tell.)
func runningBinary() string {
	path, err := os.Executable()
	if err != nil {
		return selfExe
	}
	var at, running unix.Stat_t
	if unix.Stat(path, &at) != nil || unix.Stat(selfExe, &running) != nil || at.Dev != running.Dev || at.Ino != running.Ino {
		return selfExe
	}
	return path
}

// outside lists the capabilities the calling thread has in its permitted
// set that keep does not name.
func outside(keep []int) ([]int, error) {
	_, data, err := capget()
	if err != nil {
		return nil, err
	}
	var extra []int
	for c := range lastCap() + 1 {
		if data[c/32].Permitted&(1<<(c%32)) != 0 && !slices.Contains(keep, c) {
			extra = append(extra, c)
		}
	}
	return extra, nil
}

// capget returns the calling thread's capability sets.
func capget() (unix.CapUserHeader, [2]unix.CapUserData, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return hdr, data, fmt.Errorf("capget: %w", err)
	}
	return hdr, data, nil
}

// maskWord is word i (capabilities 32i to 32i+31) of the mask of keep.
func maskWord(keep []int, i int) uint32 {
	var m uint32
	for _, c := range keep {
		if c/32 == i {
			m |= 1 << (c % 32)
		}
	}
	return m
}

// lastCap is the highest capability the kernel knows
// (/proc/sys/kernel/cap_last_cap), CAP_LAST_CAP of x/sys where it cannot
// be read.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	n, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil {
		return unix.CAP_LAST_CAP
	}
	return min(n, 63)
}
