package procinfo

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
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
	// kernel is closing its descriptors because it exits (an empty listing,
	// and PF_EXITING in the thread's flags).
	Exiting bool
}

// Descriptors reads thread tid's descriptor table and counts its
// descriptors of the inodes numbered inos on the filesystem with device
// dev. One file may stand on the mount under several inode numbers at once
// (a descriptor opened before its node was retired keeps the old number),
// so the caller names every number its handles of the file have. An inode
// number alone would also match files of other filesystems (a
// rewritten file keeps its number on the mount while the backing filesystem
// hands the freed number to a new file), so a match is checked against the
// device of the mount it was opened on, from the thread's own mountinfo
// (mount ids are per namespace). dev 0 counts every file with those numbers.
func (r *Resolver) Descriptors(tid uint32, inos []uint64, dev uint64, like SameOpen) (Closing, error) {
	var c Closing
	var mounts []uint64
	var err error
	t := r.takeTable(tid)
	if t != nil {
		c, mounts, err = t.scan(inos, like)
		if err != nil {
			// The thread is gone (a cached table says so whatever became
			// of its number) or the read failed: ask by name, as anew.
			t.close()
			t = nil
		}
	}
	if t != nil && c.Exiting {
		// An empty listing is a thread whose exit took its table away, or
		// a kept table that no longer shows the thread's: ask by name.
		t.close()
		t = nil
	}
	if t == nil {
		if t, err = r.openTable(tid); err != nil {
			return Closing{}, err
		}
		if c, mounts, err = t.scan(inos, like); err != nil {
			t.close()
			return Closing{}, err
		}
	}
	if c.Exiting {
		// A commit must not take a thread that holds no descriptor (it
		// closed them all) for one whose exit took them away: only the
		// latter is a killed writer's last close.
		switch exiting, err := r.isExiting(tid); {
		case err != nil:
			t.close()
			return Closing{}, err
		case !exiting:
			t.close()
			return Closing{}, fmt.Errorf("procinfo: %s: no descriptor listed, and the thread is not exiting", t.path)
		}
	}
	r.putTable(t)
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

// An fdTable is a thread's /proc/TID/fdinfo, kept open with the fdinfo
// file of each descriptor read there, so that the next scan of the same
// thread costs a listing and one read per descriptor (pread of the open
// file: the kernel reads what the thread holds under that number at each
// read) instead of an open, a read and a close each. The open files name
// the thread, not its number: once it is gone they fail (ENOENT, ESRCH)
// even if its number has been given to another thread, and the scan
// starts again by name. A workload that creates files one after another
// closes them from one thread, whose table is then read at each commit.
type fdTable struct {
	tid     uint32
	path    string
	dir     int
	used    bool               // dir has been listed: rewind it first
	files   map[string]*fdFile // descriptor number → its open fdinfo file
	scanned uint64             // the scan that last saw each of files
	cache   bool               // keep it after the scan
	// buf holds a part of the listing, info one fdinfo file's text. They
	// live with the table, not the scan: the listing's buffer made at
	// each scan was 8 KiB of garbage at every committing close, half of
	// what a created file allocated (docs/PERFORMANCE.md).
	buf  [8192]byte
	info [512]byte
}

type fdFile struct {
	fd   int
	scan uint64
}

// Bounds of the tables kept: how many threads, and how many descriptors
// of each (a table with more is scanned by name, its files closed).
const (
	maxTables     = 4
	maxTableFiles = 64
)

// FdinfoCacheBound is the most fdinfo directories and files a Resolver
// keeps open: its tables, each a directory and its files.
const FdinfoCacheBound = maxTables * (1 + maxTableFiles)

// openTable opens thread tid's fdinfo directory by name.
func (r *Resolver) openTable(tid uint32) (*fdTable, error) {
	dir := r.procRoot + "/" + strconv.FormatUint(uint64(tid), 10) + "/fdinfo"
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	// The daemon's own threads are never cached: a scan of its own table
	// would find the files of the scan before.
	own := r.IsThreadOf(uint32(os.Getpid()), tid)
	return &fdTable{tid: tid, path: dir, dir: dfd, files: make(map[string]*fdFile), cache: !own}, nil
}

// takeTable returns the cached table of thread tid, if any, for the
// caller's use alone until putTable.
func (r *Resolver) takeTable(tid uint32) *fdTable {
	r.tablesMu.Lock()
	defer r.tablesMu.Unlock()
	for i, t := range r.tables {
		if t.tid == tid {
			r.tables = append(r.tables[:i], r.tables[i+1:]...)
			return t
		}
	}
	return nil
}

// putTable caches t, the latest used, dropping the least recently used
// beyond maxTables; a table not to be kept is closed.
func (r *Resolver) putTable(t *fdTable) {
	if !t.cache || len(t.files) > maxTableFiles {
		t.close()
		return
	}
	r.tablesMu.Lock()
	if r.tablesClosed {
		r.tablesMu.Unlock()
		t.close()
		return
	}
	r.tables = append(r.tables, t)
	var old *fdTable
	if len(r.tables) > maxTables {
		old = r.tables[0]
		r.tables = r.tables[1:]
	}
	r.tablesMu.Unlock()
	if old != nil {
		old.close()
	}
}

// closeTables closes every cached table; none is cached afterwards.
func (r *Resolver) closeTables() {
	r.tablesMu.Lock()
	ts := r.tables
	r.tables, r.tablesClosed = nil, true
	r.tablesMu.Unlock()
	for _, t := range ts {
		t.close()
	}
}

func (t *fdTable) close() {
	for _, f := range t.files {
		unix.Close(f.fd)
	}
	unix.Close(t.dir)
}

// scan lists the table and reads the fdinfo of each descriptor, returning
// whether the table is empty (Closing.Exiting) and the mount ids of the
// descriptors of the inodes inos opened like like.
func (t *fdTable) scan(inos []uint64, like SameOpen) (Closing, []uint64, error) {
	if t.used {
		if _, err := unix.Seek(t.dir, 0, 0); err != nil {
			return Closing{}, nil, &fs.PathError{Op: "seek", Path: t.path, Err: err}
		}
	}
	t.used = true
	t.scanned++
	var c Closing
	var mounts []uint64 // the mount ids of the descriptors whose inode number is one of inos
	seen := 0
	buf := t.buf[:]
	for {
		n, err := unix.Getdents(t.dir, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Closing{}, nil, &fs.PathError{Op: "getdents", Path: t.path, Err: err}
		}
		if n <= 0 {
			break
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(uint16(b[16]) | uint16(b[17])<<8)
			if reclen < 20 || reclen > len(b) {
				return Closing{}, nil, fmt.Errorf("procinfo: %s: malformed directory entry", t.path)
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
				return Closing{}, nil, ErrTooManyDescriptors
			}
			got, err := t.read(name, t.info[:])
			if err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // closed meanwhile
				}
				return Closing{}, nil, fmt.Errorf("procinfo: %s/%s: %w", t.path, name, err)
			}
			if i, mnt, fl := fdinfoFields(got); slices.Contains(inos, i) && fl&like.Mask == like.Flags&like.Mask {
				mounts = append(mounts, mnt)
			}
		}
		// A short read is not the end: getdents stops early, room left,
		// whenever a signal is pending for this thread (the Go runtime
		// sends them to preempt), so only a read of nothing ends it.
	}
	for nm, f := range t.files {
		if f.scan != t.scanned { // a number the thread no longer holds
			unix.Close(f.fd)
			delete(t.files, nm)
		}
	}
	// An empty table is one exit_files has taken away, or that of a
	// process that closed every descriptor: Descriptors tells them apart.
	c.Exiting = seen == 0
	return c, mounts, nil
}

// read reads the fdinfo file of the descriptor named name (the listing's
// bytes: a file the table has is found without making a string of them):
// through its open file if the table has it, else opened by name (and
// kept, within bounds).
func (t *fdTable) read(name []byte, buf []byte) ([]byte, error) {
	if f, ok := t.files[string(name)]; ok {
		n, err := pread(f.fd, buf)
		if err == nil {
			f.scan = t.scanned
			return buf[:n], nil
		}
		unix.Close(f.fd)
		delete(t.files, string(name))
		return nil, err // ENOENT: the number was closed meanwhile
	}
	nm := string(name)
	fd, err := unix.Openat(t.dir, nm, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Openat(t.dir, nm, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, err
	}
	n, err := pread(fd, buf)
	if err != nil || !t.cache || len(t.files) >= maxTableFiles {
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		if len(t.files) >= maxTableFiles {
			t.cache = false // too big to keep: putTable closes it
		}
		return buf[:n], nil
	}
	t.files[nm] = &fdFile{fd: fd, scan: t.scanned}
	return buf[:n], nil
}

func pread(fd int, buf []byte) (int, error) {
	n, err := unix.Pread(fd, buf, 0)
	for err == unix.EINTR {
		n, err = unix.Pread(fd, buf, 0)
	}
	return n, err
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

// isExiting reports whether thread tid has begun to exit: PF_EXITING in
// the flags of /proc/TID/stat (field 9), which do_exit sets before it
// takes the descriptor table away. A thread gone altogether has exited.
func (r *Resolver) isExiting(tid uint32) (bool, error) {
	name := r.procRoot + "/" + strconv.FormatUint(uint64(tid), 10) + "/stat"
	var buf [2048]byte
	b, err := readSmall(name, buf[:])
	if err != nil {
		if gone(err) {
			return true, nil
		}
		return false, err
	}
	flags, err := statField(b, 9)
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return flags&pfExiting != 0, nil
}

// pfExiting is the kernel's PF_EXITING task flag.
const pfExiting = 0x4

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
	code, err := statField(b, 52)
	return int(code), err
}

// statField parses numeric field n (counted from 1, as proc(5) does; n ≥ 3)
// of a stat line.
func statField(b []byte, n int) (int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat: no (comm)")
	}
	fields := bytes.Fields(b[i+1:]) // fields 3 onwards
	if want := n - 3; len(fields) <= want {
		return 0, fmt.Errorf("malformed stat: %d fields, want %d", len(fields)+2, n)
	}
	v, err := strconv.ParseInt(string(fields[n-3]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed stat: field %d: %w", n, err)
	}
	return v, nil
}
