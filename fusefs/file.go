package fusefs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"realm/errcode"
	"realm/fusefs/dirfd"
)

// File is an open regular file: an fd of the verified backing file.
type File struct {
	node        *Node
	fd          int
	passthrough bool // the kernel may serve reads straight from fd

	mu         sync.Mutex
	released   bool
	lockOwners map[uint64]bool // owners that took locks through this handle
}

var (
	_ = (fs.NodeOpener)((*Node)(nil))
	_ = (fs.NodeCreater)((*Node)(nil))
	_ = (fs.NodeAllocater)((*Node)(nil))
	_ = (fs.NodeCopyFileRanger)((*Node)(nil))
	_ = (fs.NodeGetlker)((*Node)(nil))
	_ = (fs.NodeSetlker)((*Node)(nil))
	_ = (fs.NodeSetlkwer)((*Node)(nil))

	_ = (fs.FileReader)((*File)(nil))
	_ = (fs.FileWriter)((*File)(nil))
	_ = (fs.FileFlusher)((*File)(nil))
	_ = (fs.FileFsyncer)((*File)(nil))
	_ = (fs.FileReleaser)((*File)(nil))
	_ = (fs.FileLseeker)((*File)(nil))
	_ = (fs.FilePassthroughFder)((*File)(nil))
)

func writeFlags(flags uint32) bool {
	return flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0
}

// openFlags keeps the flags of an open(2) that matter to the backing open.
// O_CREAT and O_EXCL belong to Create; O_NOFOLLOW, O_CLOEXEC and O_NONBLOCK
// are the dirfd layer's.
func openFlags(flags uint32) int {
	return int(flags) &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOCTTY)
}

// Open opens the regular file n stands for: one openat on (parent fd, name)
// with O_NOFOLLOW, then fstat, and the fd is served only if it is the same
// regular file the node was looked up as.
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.fsys.opts.ReadOnly && writeFlags(flags) {
		return nil, 0, syscall.EROFS
	}
	pfd, name, pn, errno := n.parentFd(ctx)
	if errno != 0 {
		return nil, 0, errno
	}
	fd, err := dirfd.Open(pfd, name, openFlags(flags), 0)
	if err != nil {
		if isEscape(err) {
			return nil, 0, n.fsys.refuse(ctx, "open", pn, name, errcode.PathEscape)
		}
		return nil, 0, toErrno(err)
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		dirfd.Close(fd)
		return nil, 0, toErrno(err)
	}
	if errno := n.verify(ctx, "open", pn, name, &st); errno != 0 {
		dirfd.Close(fd)
		return nil, 0, errno
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		dirfd.Close(fd)
		return nil, 0, n.fsys.refuse(ctx, "open", pn, name, errcode.PathEscape)
	}
	if errno := n.denyOpen(ctx, "open", &st); errno != 0 {
		dirfd.Close(fd)
		return nil, 0, errno
	}
	return n.newFile(fd, flags), 0, 0
}

func (n *Node) newFile(fd int, flags uint32) *File {
	readOnly := flags&syscall.O_ACCMODE == syscall.O_RDONLY && !writeFlags(flags)
	return &File{node: n, fd: fd, passthrough: n.fsys.opts.Passthrough && readOnly}
}

// Create makes a new regular file with O_CREAT|O_EXCL, so the fd is the file
// this call made and no other. When the name exists already (made outside
// the mount since the kernel last looked), an open(2) without O_EXCL gets the
// existing file, as it would natively.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.fsys.opts.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	if hiddenName(name) {
		return nil, nil, 0, n.fsys.refuse(ctx, "create", n, name, errcode.PathEscape)
	}
	if errno := n.fsys.denyPath(ctx, "create", n, name); errno != 0 {
		return nil, nil, 0, errno
	}
	pfd, errno := n.dirFd(ctx)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	fd, err := dirfd.Open(pfd, name, openFlags(flags)|syscall.O_CREAT, mode&07777)
	if err == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
		return n.openExisting(ctx, name, flags, out)
	}
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	if errno := n.fsys.claim(ctx, n, fd); errno != 0 {
		dirfd.Close(fd)
		dirfd.Unlink(pfd, name, 0)
		return nil, nil, 0, errno
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		dirfd.Close(fd)
		return nil, nil, 0, toErrno(err)
	}
	n.fsys.fillEntry(out, &st)
	child := n.newChild(ctx, &st)
	return child, asNode(child).newFile(fd, flags), 0, 0
}

// openExisting answers a create whose name turned out to exist.
func (n *Node) openExisting(ctx context.Context, name string, flags uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	child, errno := n.Lookup(ctx, name, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if child.Mode()&syscall.S_IFMT != syscall.S_IFREG {
		return nil, nil, 0, syscall.EEXIST
	}
	fh, _, errno := asNode(child).Open(ctx, flags)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, fh, 0, 0
}

// PassthroughFd lets go-fuse register fd with the kernel for read-only
// handles, so reads never reach the daemon.
func (f *File) PassthroughFd() (int, bool) { return f.fd, f.passthrough }

func (f *File) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultFd(uintptr(f.fd), off, len(buf)), 0
}

func (f *File) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := unix.Pwrite(f.fd, data, off)
	return uint32(max(n, 0)), toErrno(err)
}

// Flush has nothing to do: data is written through on every Write.
func (f *File) Flush(ctx context.Context) syscall.Errno { return 0 }

func (f *File) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if flags&1 /* FUSE_FSYNC_FDATASYNC */ != 0 {
		return toErrno(unix.Fdatasync(f.fd))
	}
	return toErrno(unix.Fsync(f.fd))
}

func (f *File) Release(ctx context.Context) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.released {
		return syscall.EBADF
	}
	f.released = true
	// The kernel releases a handle when its last descriptor closes: the
	// locks its owners took go with it, as close(2) drops them natively.
	for owner := range f.lockOwners {
		f.node.locks.drop(owner)
	}
	return toErrno(dirfd.Close(f.fd))
}

func (f *File) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	n, err := unix.Seek(f.fd, int64(off), int(whence))
	return uint64(n), toErrno(err)
}

// Allocate preallocates or punches through the open handle.
func (n *Node) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	f, ok := fh.(*File)
	if !ok {
		return syscall.EBADF
	}
	return toErrno(unix.Fallocate(f.fd, mode, int64(off), int64(size)))
}

// CopyFileRange copies between two open handles of this mount in the
// backing filesystem, without the data passing through the daemon.
func (n *Node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, size uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok1 := fhIn.(*File)
	dst, ok2 := fhOut.(*File)
	if !ok1 || !ok2 {
		return 0, syscall.EBADF
	}
	// Both handles passed Open's check; a rename since then could have
	// moved either under a credential name, so ask again.
	for _, h := range []*File{in, dst} {
		if errno := n.fsys.denyPath(ctx, "copy_file_range", h.node, ""); errno != 0 {
			return 0, errno
		}
	}
	ri, ro := int64(offIn), int64(offOut)
	c, err := unix.CopyFileRange(in.fd, &ri, dst.fd, &ro, int(size), int(flags))
	return uint32(max(c, 0)), toErrno(err)
}

// lockFds holds, per lock owner, an fd of the file on which that owner's
// POSIX record locks and flocks are taken as open-file-description locks.
// One fd per owner gives each owner its own lock identity, as the kernel
// gives each process: an owner's locks merge and split among themselves and
// conflict with every other owner's, and with processes outside the mount.
type lockFds struct {
	mu      sync.Mutex
	byOwner map[uint64]int
}

// fd returns owner's lock fd, reopening f's file for it on first use.
func (l *lockFds) fd(f *File, owner uint64) (int, syscall.Errno) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fd, ok := l.byOwner[owner]; ok {
		return fd, 0
	}
	fd, err := dirfd.Reopen(f.fd, unix.O_RDWR)
	if err != nil {
		fd, err = dirfd.Reopen(f.fd, unix.O_RDONLY)
	}
	if err != nil {
		return -1, toErrno(err)
	}
	if l.byOwner == nil {
		l.byOwner = make(map[uint64]int)
	}
	l.byOwner[owner] = fd
	return fd, 0
}

// drop closes owner's fd, which releases every lock it held.
func (l *lockFds) drop(owner uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fd, ok := l.byOwner[owner]; ok {
		dirfd.Close(fd)
		delete(l.byOwner, owner)
	}
}

func (l *lockFds) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for owner, fd := range l.byOwner {
		dirfd.Close(fd)
		delete(l.byOwner, owner)
	}
}

// Getlk reports a lock that would conflict with lk.
func (n *Node) Getlk(ctx context.Context, fh fs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	f, ok := fh.(*File)
	if !ok {
		return syscall.EBADF
	}
	fd, errno := n.locks.fd(f, owner)
	if errno != 0 {
		return errno
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	if err := syscall.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &flk); err != nil {
		return toErrno(err)
	}
	out.FromFlockT(&flk)
	if out.Typ != syscall.F_UNLCK {
		out.Pid = 0 // an OFD lock has no single process to name
	}
	return 0
}

func (n *Node) Setlk(ctx context.Context, fh fs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return n.setLock(ctx, fh, owner, lk, flags, false)
}

// Setlkw waits for the lock by retrying: a blocking fcntl could not be
// interrupted when the caller gives up (a signal, or the kernel's INTERRUPT).
func (n *Node) Setlkw(ctx context.Context, fh fs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return n.setLock(ctx, fh, owner, lk, flags, true)
}

func (n *Node) setLock(ctx context.Context, fh fs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	f, ok := fh.(*File)
	if !ok {
		return syscall.EBADF
	}
	fd, errno := n.locks.fd(f, owner)
	if errno != 0 {
		return errno
	}
	f.mu.Lock()
	if f.lockOwners == nil {
		f.lockOwners = make(map[uint64]bool)
	}
	f.lockOwners[owner] = true
	f.mu.Unlock()
	try := func() error {
		if flags&fuse.FUSE_LK_FLOCK != 0 {
			op := unix.LOCK_NB
			switch lk.Typ {
			case syscall.F_RDLCK:
				op |= unix.LOCK_SH
			case syscall.F_WRLCK:
				op |= unix.LOCK_EX
			case syscall.F_UNLCK:
				op |= unix.LOCK_UN
			default:
				return syscall.EINVAL
			}
			return unix.Flock(fd, op)
		}
		var flk syscall.Flock_t
		lk.ToFlockT(&flk)
		flk.Pid = 0 // OFD locks require it
		return syscall.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &flk)
	}
	delay := time.Millisecond
	for {
		err := try()
		if err == nil {
			return 0
		}
		if !wait || (err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EACCES) {
			return toErrno(err)
		}
		select {
		case <-ctx.Done():
			return syscall.EINTR
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}
