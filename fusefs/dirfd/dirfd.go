// Package dirfd is the only code in realm that makes system calls on the
// backing directory. Every call names its object as (directory fd, name),
// where the directory fd was itself opened beneath the root without following
// a symlink, and acts on the name without following one either. Nothing here
// builds a path, and every call resolves one name: a deeper object is
// reached as the node tree reaches it, one verified directory fd per level.
// WalkParent, for the journal's records (which hold workspace paths), takes
// a path and walks it that way, one OpenDir per name.
//
// Flags are forced in one place, after gocryptfs's syscallcompat:
// O_NOFOLLOW and O_CLOEXEC on every open, O_EXCL whenever O_CREAT,
// AT_SYMLINK_NOFOLLOW on every *at call that would otherwise follow.
// Resolution failures that mean "this would leave the root, cross into
// another mount or follow a link" (EXDEV and ELOOP from openat2) come back
// as ErrEscape.
//
// A mount inside the backing dir (a bind of a directory or a file from
// elsewhere, another filesystem) is outside it: opens refuse to cross one
// (RESOLVE_NO_XDEV; the openat fallback compares mount ids), and Statx
// refuses a name that is a mount point. st_dev alone cannot tell: a bind
// from the same filesystem has the same device.
//
// Objects already open are acted on through their fd with AT_EMPTY_PATH or
// through /proc/self/fd/N, which names exactly that object: the gVisor gofer
// pattern. A caller that holds an fd and verified it (Fstat, then comparing
// dev and ino) therefore acts on the object it verified, whatever happens to
// the names in between.
package dirfd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrEscape reports that resolution would leave the root, follow a symlink
// or a magic link, or met an object other than the one expected.
var ErrEscape = errors.New("path escapes the backing root")

// Errno is what a caller on the mount sees of an error of this package:
// a name that would lead out of the root (ErrEscape) is EACCES, an errno
// itself, anything else EIO. It is the one mapping every layer above
// answers the kernel with.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if errors.Is(err, ErrEscape) {
		return syscall.EACCES
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// resolveFlags confine openat2 to the directory it starts from and to its
// mount.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// noOpenat2 is set once openat2 answered ENOSYS; from then on opens use the
// openat fallback, which is equally safe for single names (O_NOFOLLOW) and
// walks multi-name paths one checked step at a time.
var noOpenat2 atomic.Bool

// CheckName refuses names that are not a single directory entry. A name from
// the kernel is never "", "." or ".." and never holds '/', but the layer does
// not rely on that.
func CheckName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("name %q: %w", name, ErrEscape)
	}
	return nil
}

// escapeErr maps openat2's refusals to ErrEscape and keeps other errnos.
func escapeErr(err error) error {
	if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%w (%v)", ErrEscape, err)
	}
	return err
}

// openName opens one name in dir. flags get O_NOFOLLOW and O_CLOEXEC, and
// O_EXCL with O_CREAT.
func openName(dir int, name string, flags int, mode uint32) (int, error) {
	if err := CheckName(name); err != nil {
		return -1, err
	}
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if flags&unix.O_CREAT != 0 {
		flags |= unix.O_EXCL
	}
	if !noOpenat2.Load() {
		how := &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: resolveFlags}
		fd, err := ignoringEINTR2(func() (int, error) { return unix.Openat2(dir, name, how) })
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, unix.ENOSYS) {
			return -1, escapeErr(err)
		}
		noOpenat2.Store(true)
	}
	fd, err := ignoringEINTR2(func() (int, error) { return unix.Openat(dir, name, flags, mode) })
	if err != nil {
		return -1, escapeErr(err)
	}
	if err := sameMount(dir, fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// sameMount refuses fd, just opened by name in dir without openat2, when it
// is on another mount than dir: what RESOLVE_NO_XDEV does in one step. The
// mount id (statx STATX_MNT_ID, Linux 5.8) tells binds of one filesystem
// apart; where it is missing, st_dev is compared, which tells only other
// filesystems apart.
func sameMount(dir, fd int) error {
	a, aok, err := mountID(dir)
	if err != nil {
		return err
	}
	b, bok, err := mountID(fd)
	if err != nil {
		return err
	}
	if aok && bok {
		if a != b {
			return fmt.Errorf("%w (another mount)", ErrEscape)
		}
		return nil
	}
	var sa, sb unix.Stat_t
	if err := Fstat(dir, &sa); err != nil {
		return err
	}
	if err := Fstat(fd, &sb); err != nil {
		return err
	}
	if sa.Dev != sb.Dev {
		return fmt.Errorf("%w (another filesystem)", ErrEscape)
	}
	return nil
}

// mountID returns the id of the mount holding the object fd holds, and
// false where statx does not report it.
func mountID(fd int) (uint64, bool, error) {
	var sx unix.Statx_t
	err := ignoringEINTR(func() error {
		return unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sx)
	})
	if err != nil {
		if err == unix.ENOSYS {
			return 0, false, nil
		}
		return 0, false, err
	}
	return sx.Mnt_id, sx.Mask&unix.STATX_MNT_ID != 0, nil
}

// MountID returns the id of the mount holding the object fd holds, and
// false where statx does not report it (before Linux 5.8).
func MountID(fd int) (uint64, bool, error) { return mountID(fd) }

// Fstatfs reports the filesystem holding the object fd holds.
func Fstatfs(fd int, st *unix.Statfs_t) error {
	return ignoringEINTR(func() error { return unix.Fstatfs(fd, st) })
}

// OpenDir opens the directory name in dir as an O_PATH fd: a handle that
// pins the directory for later *at calls and grants no data access.
func OpenDir(dir int, name string) (int, error) {
	return openName(dir, name, unix.O_PATH|unix.O_DIRECTORY, 0)
}

// OpenPath opens any object (including a symlink itself) as an O_PATH fd, so
// it can be verified with Fstat and then acted on with the fd-based calls.
func OpenPath(dir int, name string) (int, error) {
	return openName(dir, name, unix.O_PATH, 0)
}

// Open opens name in dir for data. The caller must Fstat the result and
// verify it is the regular file it expects before serving any byte; Open
// itself refuses nothing but symlinks and escapes. O_NONBLOCK is added so
// that a fifo swapped in for a file cannot hang the open.
func Open(dir int, name string, flags int, mode uint32) (int, error) {
	return openName(dir, name, flags|unix.O_NONBLOCK, mode)
}

// ReopenDir opens the directory held by the O_PATH fd dir for reading its
// entries; "." names exactly that directory.
func ReopenDir(dir int) (int, error) {
	return ignoringEINTR2(func() (int, error) {
		return unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
}

// Reopen opens the object held by fd (an O_PATH fd) with new flags through
// /proc/self/fd, which names exactly that object. Used for regular files
// only; never with O_CREAT.
func Reopen(fd int, flags int) (int, error) {
	flags &^= unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW
	return ignoringEINTR2(func() (int, error) {
		return unix.Open(procPath(fd), flags|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	})
}

func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// OpenRoot opens the backing root given on the command line. Symlinks in the
// path the user typed are followed once, here; everything beneath is
// resolved without following any.
func OpenRoot(path string) (int, error) {
	fd, err := ignoringEINTR2(func() (int, error) {
		return unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// Fstat stats an open object.
func Fstat(fd int, st *unix.Stat_t) error {
	return ignoringEINTR(func() error { return unix.Fstat(fd, st) })
}

// Lstat stats name in dir without following a symlink.
func Lstat(dir int, name string, st *unix.Stat_t) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return ignoringEINTR(func() error { return unix.Fstatat(dir, name, st, unix.AT_SYMLINK_NOFOLLOW) })
}

// Mkdir creates a directory.
func Mkdir(dir int, name string, mode uint32) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return ignoringEINTR(func() error { return unix.Mkdirat(dir, name, mode) })
}

// Mknod creates a fifo or a socket; device nodes are the caller's to refuse.
func Mknod(dir int, name string, mode uint32, dev int) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return ignoringEINTR(func() error { return unix.Mknodat(dir, name, mode, dev) })
}

// Symlink creates name in dir pointing at target. The target is the
// caller's to check; the kernel never follows it here.
func Symlink(target string, dir int, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return ignoringEINTR(func() error { return unix.Symlinkat(target, dir, name) })
}

// Readlink reads the target of the symlink held by the O_PATH fd.
func Readlink(fd int) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := ignoringEINTR2(func() (int, error) { return unix.Readlinkat(fd, "", buf) })
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// Unlink removes name from dir; flags may be unix.AT_REMOVEDIR.
func Unlink(dir int, name string, flags int) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return ignoringEINTR(func() error { return unix.Unlinkat(dir, name, flags) })
}

// Rename renames between two directory fds; flags as for renameat2.
func Rename(oldDir int, oldName string, newDir int, newName string, flags uint) error {
	if err := CheckName(oldName); err != nil {
		return err
	}
	if err := CheckName(newName); err != nil {
		return err
	}
	return ignoringEINTR(func() error { return unix.Renameat2(oldDir, oldName, newDir, newName, flags) })
}

// Link makes newName in newDir a hard link to the object held by fd, an
// O_PATH fd the caller verified, so the link is to that object and no other.
func Link(fd int, newDir int, newName string) error {
	if err := CheckName(newName); err != nil {
		return err
	}
	err := ignoringEINTR(func() error { return unix.Linkat(fd, "", newDir, newName, unix.AT_EMPTY_PATH) })
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) {
		// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc form is
		// the unprivileged way to name the same object.
		err = ignoringEINTR(func() error {
			return unix.Linkat(unix.AT_FDCWD, procPath(fd), newDir, newName, unix.AT_SYMLINK_FOLLOW)
		})
	}
	return err
}

// noFchmodat2 is set once fchmodat2 (Linux 6.6) answered ENOSYS.
var noFchmodat2 atomic.Bool

// Chmod changes the mode of the object held by fd, which may be an O_PATH
// fd (fchmod refuses those). A symlink's mode cannot be changed on Linux
// and answers EOPNOTSUPP. Only fchmodat2 takes AT_EMPTY_PATH; before Linux
// 6.6 the mode is changed through /proc/self/fd/N, which names exactly the
// object fd holds, as gocryptfs and gVisor's gofer do.
func Chmod(fd int, mode uint32) error {
	if !noFchmodat2.Load() {
		err := ignoringEINTR(func() error { return fchmodat2(fd, "", mode, unix.AT_EMPTY_PATH) })
		if err != unix.ENOSYS {
			return err
		}
		noFchmodat2.Store(true)
	}
	var st unix.Stat_t
	if err := Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.EOPNOTSUPP
	}
	return ignoringEINTR(func() error { return unix.Fchmodat(unix.AT_FDCWD, procPath(fd), mode, 0) })
}

// fchmodat2 is the raw system call: x/sys's Fchmodat reports its absence as
// EOPNOTSUPP, which a symlink answers too.
func fchmodat2(dir int, name string, mode uint32, flags int) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(mode), uintptr(flags), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// Chown changes the owner of the object held by fd; -1 keeps a value.
func Chown(fd int, uid, gid int) error {
	return ignoringEINTR(func() error {
		return unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	})
}

// Utimens sets the times of the object held by fd; UTIME_NOW and
// UTIME_OMIT pass through.
func Utimens(fd int, ts []unix.Timespec) error {
	return ignoringEINTR(func() error {
		return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	})
}

// Statfs reports on the filesystem holding the object held by fd.
func Statfs(fd int, st *unix.Statfs_t) error { return Fstatfs(fd, st) }

// Extended attributes of the object held by fd. O_PATH fds take no
// f*xattr calls, so they go through /proc/self/fd/N, which names that object.

// Getxattr reads attribute attr into dest (nil asks for the size).
func Getxattr(fd int, attr string, dest []byte) (int, error) {
	return ignoringEINTR2(func() (int, error) { return unix.Getxattr(procPath(fd), attr, dest) })
}

// noGetxattrat is set once getxattrat answered ENOSYS (a kernel before
// 6.13); from then on DirGetxattr goes through /proc/self/fd.
var noGetxattrat atomic.Bool

// xattrArgs is the kernel's struct xattr_args of getxattrat(2). value is
// a pointer, not a number, so that a buffer on the stack that moves is
// followed (its __aligned_u64 is a pointer where pointers are 64 bits:
// DirGetxattr asks nothing else).
type xattrArgs struct {
	value *byte
	size  uint32
	flags uint32
}

// DirGetxattr is Getxattr for fd a directory: getxattrat(2) of "."
// beneath it, which walks no /proc magic link (a new file's default ACL is
// read at every create). O_PATH fds take no AT_EMPTY_PATH there (EBADF),
// hence ".". A kernel without the call gets Getxattr.
func DirGetxattr(fd int, attr string, dest []byte) (int, error) {
	if noGetxattrat.Load() || unsafe.Sizeof(xattrArgs{}) != 16 {
		return Getxattr(fd, attr, dest)
	}
	name, err := unix.BytePtrFromString(attr)
	if err != nil {
		return 0, err
	}
	var args xattrArgs
	if len(dest) > 0 {
		args.value, args.size = &dest[0], uint32(min(len(dest), 1<<30))
	}
	n, err := ignoringEINTR2(func() (int, error) {
		r, _, e := unix.Syscall6(unix.SYS_GETXATTRAT, uintptr(fd), uintptr(unsafe.Pointer(&dotPath[0])),
			uintptr(unix.AT_SYMLINK_NOFOLLOW), uintptr(unsafe.Pointer(name)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
		if e != 0 {
			return 0, e
		}
		return int(r), nil
	})
	if errors.Is(err, unix.ENOSYS) {
		noGetxattrat.Store(true)
		return Getxattr(fd, attr, dest)
	}
	return n, err
}

// dotPath is "." as the kernel reads a path.
var dotPath = [2]byte{'.', 0}

// Setxattr writes attribute attr.
func Setxattr(fd int, attr string, data []byte, flags int) error {
	return ignoringEINTR(func() error { return unix.Setxattr(procPath(fd), attr, data, flags) })
}

// Removexattr removes attribute attr.
func Removexattr(fd int, attr string) error {
	return ignoringEINTR(func() error { return unix.Removexattr(procPath(fd), attr) })
}

// Fsetxattr writes attribute attr of fd, a file open for reading or
// writing (not O_PATH): one system call, no path walked.
func Fsetxattr(fd int, attr string, data []byte) error {
	return ignoringEINTR(func() error { return unix.Fsetxattr(fd, attr, data, 0) })
}

// Fgetxattr reads attribute attr of fd, a file open for reading or writing
// (not O_PATH), whole: nil where the file has none (ENODATA).
func Fgetxattr(fd int, attr string) ([]byte, error) {
	for {
		size, err := ignoringEINTR2(func() (int, error) { return unix.Fgetxattr(fd, attr, nil) })
		if errors.Is(err, unix.ENODATA) {
			return nil, nil
		}
		if err != nil || size == 0 {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := ignoringEINTR2(func() (int, error) { return unix.Fgetxattr(fd, attr, buf) })
		switch {
		case errors.Is(err, unix.ERANGE):
			continue // grown since it was measured
		case errors.Is(err, unix.ENODATA):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return buf[:n], nil
	}
}

// Listxattr lists attribute names into dest (nil asks for the size).
func Listxattr(fd int, dest []byte) (int, error) {
	return ignoringEINTR2(func() (int, error) { return unix.Listxattr(procPath(fd), dest) })
}

// XattrNames lists the names of the attributes of the object held by fd
// (none where the filesystem has none: ENOTSUP).
func XattrNames(fd int) ([]string, error) {
	for {
		size, err := Listxattr(fd, nil)
		if err != nil || size == 0 {
			if errors.Is(err, unix.ENOTSUP) {
				err = nil
			}
			return nil, err
		}
		buf := make([]byte, size)
		if size, err = Listxattr(fd, buf); errors.Is(err, unix.ERANGE) {
			continue // grown since it was measured
		} else if err != nil {
			return nil, err
		}
		return strings.Split(strings.TrimSuffix(string(buf[:size]), "\x00"), "\x00"), nil
	}
}

// CopyXattrs gives the object held by dst the extended attributes of the
// object held by src, but the names in skip. An attribute that cannot be
// copied (a security label a daemon that is not root may not set) is left
// out and named in the error returned, so that the caller can say which
// ones a file lost; the others are copied all the same.
//
// dst, just made, may hold an access ACL src has not: the one a default
// ACL of its directory gave it. It is removed, so that dst grants no
// named user or group what src did not (a file rewritten through a temp
// would otherwise take its directory's default ACL).
func CopyXattrs(dst, src int, skip ...string) error {
	names, err := XattrNames(src)
	if err != nil {
		return fmt.Errorf("listing them: %w", err)
	}
	var errs []error
	for _, name := range names {
		if name != "" && !slices.Contains(skip, name) {
			errs = append(errs, copyXattr(dst, src, name))
		}
	}
	if !slices.Contains(names, aclAccess) {
		errs = append(errs, dropInherited(dst, aclAccess))
	}
	return errors.Join(errs...)
}

// aclAccess is the attribute of a file's POSIX access ACL.
const aclAccess = "system.posix_acl_access"

// dropInherited removes attribute name from dst if dst holds it. It asks
// first: a listing changes nothing, where a removal starts a transaction
// of ext4's journal even when there is nothing to remove, and most
// directories have no default ACL to give.
func dropInherited(dst int, name string) error {
	have, err := XattrNames(dst)
	if err == nil && !slices.Contains(have, name) {
		return nil
	}
	if err := Removexattr(dst, name); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP) {
		return fmt.Errorf("%s inherited: %w", name, err)
	}
	return nil
}

// copyXattr copies the attribute name of src to dst; one removed
// meanwhile is no loss.
func copyXattr(dst, src int, name string) error {
	size, err := Getxattr(src, name, nil)
	if errors.Is(err, unix.ENODATA) {
		return nil
	}
	if err == nil {
		val := make([]byte, size)
		if size, err = Getxattr(src, name, val); err == nil {
			err = Setxattr(dst, name, val[:size], 0)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Close closes an fd; an error is only worth a log line. It is never
// tried again: the fd is gone whatever close(2) answers, EINTR included.
// A negative fd is this layer's "none" (an open that was not made): it is
// not passed to close(2), which would only answer EBADF.
func Close(fd int) error {
	if fd < 0 {
		return nil
	}
	return unix.Close(fd)
}

// Dup returns another descriptor of the object fd holds, close-on-exec and
// above the standard three.
func Dup(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3) }

// Dirent is one entry of a backing directory.
type Dirent struct {
	Name string
	Ino  uint64
	Type uint8 // unix.DT_*; DT_UNKNOWN where the filesystem does not say
}

// ReadDir lists the directory held by the O_PATH fd dir, without "." and
// "..". It reads through a fresh fd of exactly that directory.
func ReadDir(dir int) ([]Dirent, error) {
	fd, err := ReopenDir(dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []Dirent
	buf := make([]byte, 32<<10)
	for {
		n, err := ignoringEINTR2(func() (int, error) { return unix.Getdents(fd, buf) })
		if err != nil {
			return out, err
		}
		if n <= 0 {
			return out, nil
		}
		out = parseDirents(buf[:n], out)
	}
}

// parseDirents decodes linux_dirent64 records (nextDirent) but "." and
// "..".
func parseDirents(b []byte, out []Dirent) []Dirent {
	for {
		ino, typ, name, rest, ok := nextDirent(b)
		if !ok {
			return out
		}
		if !dotName(name) {
			out = append(out, Dirent{Name: string(name), Ino: ino, Type: typ})
		}
		b = rest
	}
}

// nextDirent decodes the first linux_dirent64 record of b, ino (8), off
// (8), reclen (2), type (1), then a NUL-terminated name (returned
// without its NUL), and the records after it; ok false: none, or a
// malformed one.
func nextDirent(b []byte) (ino uint64, typ byte, name, rest []byte, ok bool) {
	if len(b) < 19 {
		return 0, 0, nil, nil, false
	}
	reclen := int(binary.NativeEndian.Uint16(b[16:18]))
	if reclen < 19 || reclen > len(b) {
		return 0, 0, nil, nil, false
	}
	name = b[19:reclen]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return binary.NativeEndian.Uint64(b[0:8]), b[18], name, b[reclen:], true
}

// dotName: "." or "..".
func dotName(name []byte) bool { return string(name) == "." || string(name) == ".." }

// CloneOrCopy fills dst, an empty file, with the first size bytes of src
// (all of it if size < 0): a reflink (FICLONE) of the whole file where the
// filesystem shares extents, else a copy of src's data extents only
// (CopySparse), so that a write into a large sparse file costs its data,
// not its size. Both fds are open regular files the caller verified.
func CloneOrCopy(dst, src int, size int64) error {
	if size < 0 {
		if err := ignoringEINTR(func() error { return unix.IoctlFileClone(dst, src) }); err == nil {
			return nil
		}
		var st unix.Stat_t
		if err := Fstat(src, &st); err != nil {
			return err
		}
		size = st.Size
	}
	return CopySparse(dst, src, size)
}

// SyncDir makes the entries of the directory held by the O_PATH fd dir
// durable (a rename into it, say).
func SyncDir(dir int) error {
	fd, err := ReopenDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return Fsync(fd)
}

// Statx stats name in dir without following a symlink ("" stats dir
// itself) and returns, besides the usual fields, a generation for the
// mount's node identity: the birth time where the filesystem records one,
// so that an inode number freed and reused by a new file is told apart from
// the file that had it. 0 where there is no birth time.
//
// A name that is a mount point (STATX_ATTR_MOUNT_ROOT, or a mount id other
// than dir's where the attribute is not reported) is ErrEscape: its stat
// is the mounted object's, which is not in the backing dir.
func Statx(dir int, name string, st *unix.Stat_t) (gen uint64, err error) {
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_STATX_SYNC_AS_STAT
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	} else if err := CheckName(name); err != nil {
		return 0, err
	}
	var sx unix.Statx_t
	err = ignoringEINTR(func() error {
		return unix.Statx(dir, name, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME|unix.STATX_MNT_ID, &sx)
	})
	if err != nil {
		return 0, err
	}
	if name != "" {
		if err := notMountRoot(dir, &sx); err != nil {
			return 0, err
		}
	}
	*st = unix.Stat_t{
		Dev:     unix.Mkdev(sx.Dev_major, sx.Dev_minor),
		Ino:     sx.Ino,
		Nlink:   uint64(sx.Nlink),
		Mode:    uint32(sx.Mode),
		Uid:     sx.Uid,
		Gid:     sx.Gid,
		Rdev:    unix.Mkdev(sx.Rdev_major, sx.Rdev_minor),
		Size:    int64(sx.Size),
		Blksize: int64(sx.Blksize),
		Blocks:  int64(sx.Blocks),
		Atim:    unix.Timespec{Sec: sx.Atime.Sec, Nsec: int64(sx.Atime.Nsec)},
		Mtim:    unix.Timespec{Sec: sx.Mtime.Sec, Nsec: int64(sx.Mtime.Nsec)},
		Ctim:    unix.Timespec{Sec: sx.Ctime.Sec, Nsec: int64(sx.Ctime.Nsec)},
	}
	if sx.Mask&unix.STATX_BTIME != 0 {
		gen = uint64(sx.Btime.Sec)<<30 ^ uint64(sx.Btime.Nsec)
	}
	return gen, nil
}

// notMountRoot refuses the statx of a name that is a mount point.
func notMountRoot(dir int, sx *unix.Statx_t) error {
	if sx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		if sx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
			return fmt.Errorf("%w (a mount point)", ErrEscape)
		}
		return nil
	}
	if sx.Mask&unix.STATX_MNT_ID == 0 {
		return nil // neither is reported (before Linux 5.8): opens still refuse it
	}
	id, ok, err := mountID(dir)
	if err != nil {
		return err
	}
	if ok && id != sx.Mnt_id {
		return fmt.Errorf("%w (a mount point)", ErrEscape)
	}
	return nil
}

// Handle returns the identity fanotify reports for the directory held by
// fd: its filesystem's id and its file handle, as one comparable string.
func Handle(fd int) (string, error) {
	h, err := DirHandle(fd)
	if err != nil {
		return "", err
	}
	var sfs unix.Statfs_t
	if err := Fstatfs(fd, &sfs); err != nil {
		return "", err
	}
	return HandleKey(sfs.Fsid.Val, h.Type(), h.Bytes()), nil
}

// DirHandle returns the file handle of the directory held by fd, for
// OpenDirByHandle once fd is closed.
func DirHandle(fd int) (unix.FileHandle, error) {
	return ignoringEINTR2(func() (unix.FileHandle, error) {
		h, _, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH)
		return h, err
	})
}

// OpenDirByHandle opens the directory h names as an O_PATH fd, on the
// mount of mountFd (a descriptor of the backing root opened for reading:
// an O_PATH one is EBADF). It needs CAP_DAC_READ_SEARCH
// (EPERM without); the caller must check that what it opened is the
// directory it expects, and that it is still beneath the root (Root.Holds):
// a handle, as an open fd, follows its directory wherever it is renamed.
func OpenDirByHandle(mountFd int, h unix.FileHandle) (int, error) {
	return ignoringEINTR2(func() (int, error) {
		return unix.OpenByHandleAt(mountFd, h, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	})
}

// HandleKey is Handle's string for a filesystem id, handle type and bytes.
func HandleKey(fsid [2]int32, typ int32, b []byte) string {
	var k []byte
	k = binary.LittleEndian.AppendUint32(k, uint32(fsid[0]))
	k = binary.LittleEndian.AppendUint32(k, uint32(fsid[1]))
	k = binary.LittleEndian.AppendUint32(k, uint32(typ))
	return string(append(k, b...))
}

// FanotifyMark adds (or, with remove, removes) the fanotify mark of mask
// on the directory held by fd. fanotify_mark takes no O_PATH fd as the
// object itself, so the mark is set on "." beneath it, which is that
// directory.
func FanotifyMark(fan, fd int, mask uint64, remove bool) error {
	flags := uint(unix.FAN_MARK_ADD)
	if remove {
		flags = unix.FAN_MARK_REMOVE
	}
	return unix.FanotifyMark(fan, flags|unix.FAN_MARK_ONLYDIR, mask, fd, ".")
}

// InotifyWatch adds an inotify watch of mask on the directory held by fd,
// named through /proc/self/fd/N, which is exactly that directory.
func InotifyWatch(in, fd int, mask uint32) (int, error) {
	return unix.InotifyAddWatch(in, procPath(fd), mask|unix.IN_ONLYDIR)
}

// Root is the backing root, for the question whether a directory fd still
// holds a directory beneath it. A directory's fd follows the directory
// wherever it is renamed, so a directory the host moves out of the backing
// dir stays usable through an fd opened while it was inside: the fd alone
// is no proof of where it is now.
type Root struct {
	fd       int
	dev, ino uint64
	procFd   int                    // /proc/self/fd, so a readlink resolves one name
	path     atomic.Pointer[string] // the root's path when last read
}

// NewRoot is the Root of the directory held by fd, which stays the
// caller's to close; Close releases the Root's own descriptor.
func NewRoot(fd int) (*Root, error) {
	var st unix.Stat_t
	if err := Fstat(fd, &st); err != nil {
		return nil, err
	}
	proc, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/proc/self/fd", Err: err}
	}
	return &Root{fd: fd, dev: st.Dev, ino: st.Ino, procFd: proc}, nil
}

// Close closes the Root's descriptor of /proc/self/fd.
func (r *Root) Close() error { return unix.Close(r.procFd) }

// Holds reports whether the directory held by fd is the root or beneath
// it now (Where).
func (r *Root) Holds(fd int) (bool, error) {
	_, _, inside, err := r.Where(fd)
	return inside, err
}

// Where reports whether the directory held by fd is the root or beneath
// it now, and where: its path relative to the root ("" for the root
// itself) as the kernel has it now, whatever a caller's tree of names
// says yet. The kernel says where the directory is (the path of
// /proc/self/fd/N: one readlink, the path is only compared, never
// resolved); the root's own path is read again only when the directory's
// does not start with it, so a root renamed by the host costs one more
// readlink once. Where the path is longer than the kernel gives
// (ENAMETOOLONG), Where walks ".." from fd up, comparing identities, and
// the path is not known.
func (r *Root) Where(fd int) (rel string, known, inside bool, err error) {
	p, err := r.fdPath(fd)
	if err == nil {
		if rp := r.path.Load(); rp != nil {
			if rel, ok := relTo(*rp, p); ok {
				return rel, true, true, nil
			}
		}
		var rp string
		if rp, err = r.fdPath(r.fd); err == nil {
			r.path.Store(&rp)
			rel, ok := relTo(rp, p)
			return rel, ok, ok, nil
		}
	}
	if err == unix.ENAMETOOLONG {
		inside, err = r.walkUp(fd)
		return "", false, inside, err
	}
	return "", false, false, err
}

// Rel returns the path of the directory held by fd relative to the root
// (Where). A directory not beneath the root is ErrEscape; a path longer
// than the kernel gives is ENAMETOOLONG.
func (r *Root) Rel(fd int) (string, error) {
	rel, known, inside, err := r.Where(fd)
	switch {
	case err != nil:
		return "", err
	case !inside:
		return "", ErrEscape
	case !known:
		return "", unix.ENAMETOOLONG
	}
	return rel, nil
}

// relTo returns p relative to root, if p is root or beneath it.
func relTo(root, p string) (string, bool) {
	switch {
	case p == root:
		return "", true
	case root == "/":
		return p[1:], true
	case strings.HasPrefix(p, root+"/"):
		return p[len(root)+1:], true
	}
	return "", false
}

// fdPath is the kernel's path of the object held by fd.
func (r *Root) fdPath(fd int) (string, error) {
	name := strconv.Itoa(fd)
	// The first read goes to the stack: a workspace path is short, and
	// this runs for a directory at most requests.
	var small [256]byte
	for size := len(small); ; size *= 2 {
		buf := small[:]
		if size > len(small) {
			buf = make([]byte, size)
		}
		n, err := unix.Readlinkat(r.procFd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// maxWalk bounds walkUp: a directory deeper than this is not taken as
// beneath the root.
const maxWalk = 1 << 16

// walkUp follows ".." from the directory held by fd until it meets the
// root (true) or the top of the filesystem tree (false).
func (r *Root) walkUp(fd int) (bool, error) {
	cur, err := ignoringEINTR2(func() (int, error) {
		return unix.Openat(fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return false, err
	}
	defer func() { unix.Close(cur) }()
	var st unix.Stat_t
	if err := Fstat(cur, &st); err != nil {
		return false, err
	}
	for range maxWalk {
		if st.Dev == r.dev && st.Ino == r.ino {
			return true, nil
		}
		up, err := ignoringEINTR2(func() (int, error) {
			return unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return false, err
		}
		var ust unix.Stat_t
		if err := Fstat(up, &ust); err != nil {
			unix.Close(up)
			return false, err
		}
		unix.Close(cur)
		cur = up
		if ust.Dev == st.Dev && ust.Ino == st.Ino {
			return false, nil // "/" is its own parent
		}
		st = ust
	}
	return false, nil
}
