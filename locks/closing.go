package locks

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// What a closing process still holds. A write handle on the mount is
// committed when the process that opened it closes its last descriptor of
// it: a shell's `cmd > f` opens f, dup2s it to fd 1 and closes the first
// descriptor before cmd has written a byte, and that close must not commit.
// The kernel tells the daemon of every close (FLUSH) but not how many
// descriptors remain, so the closing thread's descriptor table is read from
// /proc/TID/fdinfo.
//
// Only fdinfo is read: listing and reading it takes the task's spin locks
// and no lock that a thread inside execve or exit holds, so a thread closing
// its descriptors there, waiting for the daemon's reply, cannot deadlock it.
// Not /proc/TID/fd: its links wait for such a thread (seen: a daemon thread
// in call_proc_get_link beside a python in execve, both stuck).

// ErrTooManyDescriptors is returned by Descriptors for a process with more
// descriptors than it will read.
var ErrTooManyDescriptors = errors.New("too many descriptors to scan")

// maxScan bounds the descriptors Descriptors reads: each costs three system
// calls, and a process with more is told apart by the error.
const maxScan = 4096

// SameOpen says which of a thread's descriptors of an inode Descriptors
// counts: those whose open flags agree with Flags in the bits of Mask
// (fdinfo's "flags:"). The kernel tells the daemon of a close (FLUSH) with
// no word of which open file description it closed, and fdinfo names none;
// the flags fixed at open (the access mode, O_APPEND) tell apart the open
// a close ends from another open of the same file, such as a read
// descriptor a shell holds beside a rewrite (`exec 3<f; echo new > f`). A
// zero Mask counts every descriptor of the inode.
type SameOpen struct{ Mask, Flags uint32 }

// Closing is what the thread closing a descriptor still holds.
type Closing struct {
	// Others is how many of its descriptors refer to an inode with the
	// number asked about, opened with the flags asked about (SameOpen). A
	// count too high only defers a commit: another open of the file with
	// the same flags counts too.
	Others int
	// Exiting is true when the thread has no descriptor table left: the
	// kernel is closing its descriptors because it exits.
	Exiting bool
}

// Descriptors reads thread tid's descriptor table and counts its
// descriptors of the inode numbered ino on the filesystem with device dev.
// An inode number alone would also match files of other filesystems (a
// rewritten file keeps its number on the mount while the backing filesystem
// hands the freed number to a new file), so a match is checked against the
// device of the mount it was opened on, from the thread's own mountinfo
// (mount ids are per namespace). dev 0 counts every file with that number.
func (r *Resolver) Descriptors(tid uint32, ino, dev uint64, like SameOpen) (Closing, error) {
	dir := r.procRoot + "/" + strconv.FormatUint(uint64(tid), 10) + "/fdinfo"
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Closing{}, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	var c Closing
	var info [512]byte
	var mounts []uint64 // the mount ids of the descriptors whose inode number is ino
	seen := 0
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(dfd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Closing{}, &fs.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n <= 0 {
			break
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(uint16(b[16]) | uint16(b[17])<<8)
			if reclen < 20 || reclen > len(b) {
				return Closing{}, fmt.Errorf("locks: %s: malformed directory entry", dir)
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if len(name) == 0 || name[0] == '.' {
				continue
			}
			if seen++; seen > maxScan {
				return Closing{}, ErrTooManyDescriptors
			}
			nm := string(name)
			got, err := readAt(dfd, nm, info[:])
			if err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // closed meanwhile
				}
				return Closing{}, fmt.Errorf("locks: %s/%s: %w", dir, nm, err)
			}
			if i, mnt, fl := fdinfoFields(got); i == ino && fl&like.Mask == like.Flags&like.Mask {
				mounts = append(mounts, mnt)
			}
		}
	}
	// Every live process holds some descriptor, if only the one the kernel
	// is closing now; an empty table is one exit_files has taken away.
	c.Exiting = seen == 0
	if dev == 0 || len(mounts) == 0 {
		c.Others = len(mounts)
		return c, nil
	}
	devs, err := r.mountDevices(tid)
	if err != nil {
		return Closing{}, err
	}
	for _, m := range mounts {
		if d, ok := devs[m]; !ok || d == dev {
			c.Others++ // a mount that vanished meanwhile counts: deferring is safe
		}
	}
	return c, nil
}

// mountDevices maps the mount ids of thread tid's namespace to the device
// numbers of their filesystems, from /proc/TID/mountinfo.
func (r *Resolver) mountDevices(tid uint32) (map[uint64]uint64, error) {
	name := r.procRoot + "/" + strconv.FormatUint(uint64(tid), 10) + "/mountinfo"
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return parseMountDevices(b), nil
}

// parseMountDevices reads "ID PARENT MAJOR:MINOR ..." lines of mountinfo.
func parseMountDevices(b []byte) map[uint64]uint64 {
	devs := make(map[uint64]uint64)
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		b = rest
		f := bytes.Fields(line)
		if len(f) < 3 {
			continue
		}
		id, err1 := strconv.ParseUint(string(f[0]), 10, 64)
		maj, min, ok := bytes.Cut(f[2], []byte(":"))
		if err1 != nil || !ok {
			continue
		}
		ma, err2 := strconv.ParseUint(string(maj), 10, 32)
		mi, err3 := strconv.ParseUint(string(min), 10, 32)
		if err2 != nil || err3 != nil {
			continue
		}
		devs[id] = unix.Mkdev(uint32(ma), uint32(mi))
	}
	return devs
}

// readAt reads the small file name beneath dir into buf.
func readAt(dir int, name string, buf []byte) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	for err == unix.EINTR {
		n, err = unix.Read(fd, buf)
	}
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// fdinfoFields returns the "ino:", "mnt_id:" and "flags:" (octal) fields
// of an fdinfo file, 0 for one it lacks.
func fdinfoFields(b []byte) (ino, mnt uint64, flags uint32) {
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		b = rest
		if v, ok := bytes.CutPrefix(line, []byte("ino:")); ok {
			ino, _ = strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		} else if v, ok := bytes.CutPrefix(line, []byte("mnt_id:")); ok {
			mnt, _ = strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		} else if v, ok := bytes.CutPrefix(line, []byte("flags:")); ok {
			fl, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
			flags = uint32(fl)
		}
	}
	return ino, mnt, flags
}

// ExitSignal returns the signal that is ending thread tid, 0 if it is not
// being killed by one (it exits normally, or is not exiting). It reads field
// 52 of /proc/TID/stat, the exit status the kernel set when the thread began
// to exit; call it only for a thread that is exiting (Closing.Exiting).
func (r *Resolver) ExitSignal(tid uint32) (int, error) {
	name := r.procRoot + "/" + strconv.FormatUint(uint64(tid), 10) + "/stat"
	var buf [2048]byte
	b, err := readSmall(name, buf[:])
	if err != nil {
		return 0, err
	}
	code, err := statExitCode(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return code & 0x7f, nil
}

// statExitCode parses field 52, exit_code, of a stat line.
func statExitCode(b []byte) (int, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat: no (comm)")
	}
	fields := bytes.Fields(b[i+1:]) // fields 3 onwards
	const want = 52 - 3
	if len(fields) <= want {
		return 0, fmt.Errorf("malformed stat: %d fields, want 52", len(fields)+2)
	}
	code, err := strconv.Atoi(string(fields[want]))
	if err != nil {
		return 0, fmt.Errorf("malformed stat: exit_code: %w", err)
	}
	return code, nil
}
