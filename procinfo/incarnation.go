package procinfo

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
)

// Incarnation tells apart the owners one owner string names over time. An
// owner "session:N" or "pid:N" is named by a pid, and a pid is given again
// once its process (a session's leader and every member) is gone: a
// person's shell may be "session:N" an hour after an agent's session was.
// The journal of changes records each change's Incarnation beside its
// owner, so that undoing one never undoes the other's.
//
// It is "TICKS-BOOT": TICKS the start time of the owner's process (the
// session's leader; field 22 of /proc/PID/stat, clock ticks since boot,
// fixed for the process's life, the one the Resolver already tells reused
// pids apart by), and BOOT the first 8 hex digits of the kernel's boot id
// (/proc/sys/kernel/random/boot_id, random at each boot), since the
// journal outlives a reboot and the ticks of early processes repeat across
// boots. Two processes with one pid in one boot would have to start within
// one tick (10 ms) of each other, the pid space wrapped between them. A
// wall-clock start (btime + ticks) is not stable: btime follows
// clock_settime and NTP's steps.
//
// "" is unknown: a cgroup owner (no pid to reuse), the kernel, a session
// whose leader has exited (its start is gone with it), a process gone.
type Incarnation string

// Incarnation is the incarnation of owner o as it is now: of "session:N"
// the start of process N if it still leads session N, of "pid:N" the start
// of process N; "" for any other owner or one whose process is gone. The
// caller asks while the owner makes a change (its request), so the process
// it reads is the owner's.
func (r *Resolver) Incarnation(o Owner) Incarnation {
	r.bootOnce.Do(func() { r.bootID = readBootID(r.procRoot) })
	return incarnation(r.procRoot, r.bootID, o)
}

// procBoot is the boot id's head as /proc gives it, read once.
var procBoot = sync.OnceValue(func() string { return readBootID("/proc") })

// IncarnationOf is Resolver.Incarnation on /proc, for a caller with no
// Resolver at hand (the journal's producers).
func IncarnationOf(o Owner) Incarnation {
	if !strings.HasPrefix(string(o), "session:") && !strings.HasPrefix(string(o), "pid:") {
		return "" // not a syscall for the default mode's owners
	}
	return incarnation("/proc", procBoot(), o)
}

func incarnation(procRoot, boot string, o Owner) Incarnation {
	kind, n, ok := strings.Cut(string(o), ":")
	if !ok || (kind != "session" && kind != "pid") {
		return ""
	}
	pid, err := strconv.ParseUint(n, 10, 32)
	if err != nil || pid == 0 || strconv.FormatUint(pid, 10) != n {
		return ""
	}
	st, err := readStat(procRoot + "/" + n + "/stat")
	if err != nil {
		return ""
	}
	// A session's id is its leader's pid, which is not given again while
	// the session has a member: a process N of another session is a new
	// one, the leader gone (unknown).
	if kind == "session" && st.session != pid {
		return ""
	}
	return MakeIncarnation(st.start, boot)
}

// MakeIncarnation is the Incarnation of a process started ticks after the
// boot whose id's head is boot ("" if unknown: the ticks alone).
func MakeIncarnation(ticks uint64, boot string) Incarnation {
	s := strconv.FormatUint(ticks, 10)
	if boot != "" {
		s += "-" + boot
	}
	return Incarnation(s)
}

// readBootID is the first 8 hex digits of procRoot's boot id ("" if it
// cannot be read).
func readBootID(procRoot string) string {
	var buf [64]byte
	b, err := readSmall(procRoot+"/sys/kernel/random/boot_id", buf[:])
	if err != nil {
		return ""
	}
	b = bytes.ReplaceAll(bytes.TrimSpace(b), []byte("-"), nil)
	if len(b) < 8 {
		return ""
	}
	for _, c := range b[:8] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	return string(b[:8])
}
