// Package sysfail makes chosen system calls fail, for tests of what realm
// does on kernels older than this one: a seccomp filter answers them with an
// errno (ENOSYS, as a kernel without the call would) before the kernel runs
// them. Nothing outside tests and realmtest builds uses it.
//
// A filter stays for the life of the threads it is installed on. Install it
// on one locked OS thread (runtime.LockOSThread, and let the goroutine end
// without unlocking, so that the thread ends with it) or, with AllThreads,
// on the whole process.
package sysfail

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Rule makes system call Nr fail with Errno. With Arg >= 0 it fails only
// when argument Arg (its low 32 bits) has every bit of Set and no bit of
// Clear, so that, say, only openat calls with O_NOFOLLOW fail.
type Rule struct {
	Nr         uintptr
	Arg        int
	Set, Clear uint32
	Errno      syscall.Errno
}

// Install loads a filter of rules on the calling thread, or on every thread
// of the process if allThreads.
func Install(rules []Rule, allThreads bool) error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("sysfail: %s: only amd64 system call numbers are known", runtime.GOARCH)
	}
	prog := program(rules)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sysfail: no_new_privs: %w", err)
	}
	var flags uintptr
	if allThreads {
		flags = unix.SECCOMP_FILTER_FLAG_TSYNC
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("sysfail: seccomp: %w", e)
	}
	return nil
}

// Classic BPF opcodes (linux/filter.h).
const (
	ldAbs   = 0x20 // BPF_LD | BPF_W | BPF_ABS
	jeqK    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	jsetK   = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	andK    = 0x54 // BPF_ALU | BPF_AND | BPF_K
	retK    = 0x06 // BPF_RET | BPF_K
	offNr   = 0    // struct seccomp_data: nr
	offArch = 4    //                      arch
	offArgs = 16   //                      args[6], 8 bytes each
)

// program compiles rules: one block each, which falls through to the next
// block unless the call matches; calls of another architecture and calls no
// rule matches are allowed.
func program(rules []Rule) []unix.SockFilter {
	p := []unix.SockFilter{
		{Code: ldAbs, K: offArch},
		{Code: jeqK, Jt: 1, Jf: 0, K: unix.AUDIT_ARCH_X86_64},
		{Code: retK, K: unix.SECCOMP_RET_ALLOW},
	}
	for _, r := range rules {
		ret := unix.SockFilter{Code: retK, K: unix.SECCOMP_RET_ERRNO | uint32(r.Errno)&0xffff}
		if r.Arg < 0 {
			p = append(p,
				unix.SockFilter{Code: ldAbs, K: offNr},
				unix.SockFilter{Code: jeqK, Jt: 0, Jf: 1, K: uint32(r.Nr)},
				ret)
			continue
		}
		arg := uint32(offArgs + 8*r.Arg) // the low half, little-endian
		p = append(p,
			unix.SockFilter{Code: ldAbs, K: offNr},
			unix.SockFilter{Code: jeqK, Jt: 0, Jf: 6, K: uint32(r.Nr)},
			unix.SockFilter{Code: ldAbs, K: arg},
			unix.SockFilter{Code: andK, K: r.Set},
			unix.SockFilter{Code: jeqK, Jt: 0, Jf: 3, K: r.Set},
			unix.SockFilter{Code: ldAbs, K: arg},
			unix.SockFilter{Code: jsetK, Jt: 1, Jf: 0, K: r.Clear},
			ret)
	}
	return append(p, unix.SockFilter{Code: retK, K: unix.SECCOMP_RET_ALLOW})
}
