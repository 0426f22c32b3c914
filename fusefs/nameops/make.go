package nameops

import (
	"context"
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journaling"
	"github.com/realm-dev/realm/locks"
)

// The ops that give a name to an object: a new one (Make, Create) or one
// that exists (Link). The caller holds nsMu shared from its preparation of
// the name through the op (fusefs's Node.prepare), so that no directory
// rename moves the name's place between its judgement and its system
// call.

// Make finishes making a directory, fifo, socket or symlink named name in
// dir, whose fd pfd the caller prepared (rel: the name's workspace path):
// make is called with a mode with no permission bits (guard.FirstMode),
// so that the object can be recognised as the one this call made
// (guard.MadeByCall) before it is given to the caller and its mode is
// set. Without ownership to hand over, make gets the final mode and no
// check is needed. The final mode is the caller's mode as the kernel
// would make it natively (admit.Gate.NewMode: its umask, or the
// directory's default ACL); a symlink's is always 0777. st is the object
// made, and gen its generation, for the caller's node.
func (o *Ops[N]) Make(ctx context.Context, op string, dir N, pfd int, rel, name string, mode uint32, make func(mode uint32) error, st *unix.Stat_t) (gen uint64, _ syscall.Errno) {
	if errno := o.takeInode(ctx, op, rel); errno != 0 {
		return 0, errno
	}
	isLink := mode&syscall.S_IFMT == syscall.S_IFLNK
	if !isLink {
		typ := mode & syscall.S_IFMT
		mode = typ | o.Gate.NewMode(ctx, op, dir, pfd, name, typ, mode)
	}
	handOver := o.Gate.HandsOver(ctx)
	c, errno := o.Journal.Begin(ctx, op, rel, o.Journal.Record(ctx, "", journaling.NamedOps[op], rel), journal.NoKeep)
	if errno != 0 {
		return 0, errno
	}
	err := make(guard.FirstMode(mode, handOver))
	var made *journal.ID
	if err == nil {
		made = journaling.IDAt(pfd, name)
	}
	o.Journal.End(c, err, made)
	if err != nil {
		return 0, dirfd.Errno(err)
	}
	fd, err := dirfd.OpenPath(pfd, name)
	if err != nil {
		return 0, dirfd.Errno(err)
	}
	defer dirfd.Close(fd)
	if err := dirfd.Fstat(fd, st); err != nil {
		return 0, dirfd.Errno(err)
	}
	inherited, ok := guard.MadeByCall(st, mode, handOver, uint32(unix.Geteuid()))
	if !ok {
		// Not what this call made: something outside swapped it in.
		return 0, o.Gate.Refuse(ctx, op, dir, name, errcode.PathEscape, admit.RuleEscapeSwapped)
	}
	if handOver {
		if errno := o.Gate.Claim(ctx, pfd, fd); errno != 0 {
			dirfd.Unlink(pfd, name, unlinkFlags(mode))
			return 0, errno
		}
		if !isLink {
			if err := dirfd.Chmod(fd, mode&07777|inherited); err != nil {
				dirfd.Unlink(pfd, name, unlinkFlags(mode))
				return 0, dirfd.Errno(err)
			}
		}
	}
	gen, errno = statNew(fd, st)
	if errno != 0 {
		return 0, errno
	}
	o.Gate.Guard.MadeNew(rel, st, gen)
	return gen, 0
}

func unlinkFlags(mode uint32) int {
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		return unix.AT_REMOVEDIR
	}
	return 0
}

// Create makes name in dir, whose fd pfd the caller prepared (rel: the
// name's workspace path), a new, empty regular file (O_CREAT|O_EXCL) of
// the caller's mode as the kernel would make it natively
// (admit.Gate.NewMode), given to the caller (admit.Gate.Claim), recorded
// if made at a credential path, the journal's record naming owner (the
// caller's). It returns the file's fd (read-write) and generation; st is
// its stat. EEXIST: the name exists.
func (o *Ops[N]) Create(ctx context.Context, owner locks.Owner, dir N, pfd int, rel, name string, mode uint32, st *unix.Stat_t) (fd int, gen uint64, _ syscall.Errno) {
	perm := o.Gate.NewMode(ctx, "create", dir, pfd, name, syscall.S_IFREG, mode)
	if errno := o.takeInode(ctx, "create", rel); errno != 0 {
		return -1, 0, errno
	}
	c, errno := o.Journal.Begin(ctx, "create", rel, o.Journal.Record(ctx, owner, journal.OpCreate, rel), journal.NoKeep)
	if errno != 0 {
		return -1, 0, errno
	}
	fd, err := dirfd.Open(pfd, name, unix.O_RDWR|unix.O_CREAT, perm)
	if err != nil {
		o.Journal.End(c, err, nil)
		return -1, 0, dirfd.Errno(err)
	}
	if errno := o.Gate.Claim(ctx, pfd, fd); errno != 0 {
		o.Journal.End(c, errno, nil) // removed again: no change
		dirfd.Close(fd)
		dirfd.Unlink(pfd, name, 0)
		return -1, 0, errno
	}
	gen, errno = statNew(fd, st) // the journal's identity of the file, and its attributes
	o.Journal.End(c, nil, journaling.StatID(st, errno == 0))
	if errno != 0 {
		dirfd.Close(fd)
		return -1, 0, errno
	}
	o.Gate.Guard.MadeNew(rel, st, gen)
	return fd, gen, 0
}

// CreateTemp makes the file a create of name in dir (fd pfd, prepared;
// rel: the name's workspace path) makes, as the hidden temp tempName
// alone (a name the write engine gave out: writeengine
// Engine.NewTempName): of the caller's mode as the kernel would make it
// natively, given to the caller, as Create makes it. The name stays free
// in BACKING until the write's first commit publishes the temp there (or
// a request reaching it first makes it real), which records the create
// in the journal. It returns the temp's fd (read-write) and generation;
// st is its stat. EEXIST: name exists in BACKING.
func (o *Ops[N]) CreateTemp(ctx context.Context, dir N, pfd int, rel, name, tempName string, mode uint32, st *unix.Stat_t) (fd int, gen uint64, _ syscall.Errno) {
	perm := o.Gate.NewMode(ctx, "create", dir, pfd, name, syscall.S_IFREG, mode)
	if errno := o.takeInode(ctx, "create", rel); errno != 0 {
		return -1, 0, errno
	}
	var at unix.Stat_t
	switch err := dirfd.Lstat(pfd, name, &at); {
	case err == nil:
		return -1, 0, syscall.EEXIST
	case !errors.Is(err, unix.ENOENT):
		return -1, 0, dirfd.Errno(err)
	}
	fd, err := dirfd.Open(pfd, tempName, unix.O_RDWR|unix.O_CREAT, perm)
	if err != nil {
		return -1, 0, dirfd.Errno(err)
	}
	if errno := o.Gate.Claim(ctx, pfd, fd); errno != 0 {
		dirfd.Close(fd)
		dirfd.Unlink(pfd, tempName, 0)
		return -1, 0, errno
	}
	gen, errno := statNew(fd, st)
	if errno != 0 {
		dirfd.Close(fd)
		dirfd.Unlink(pfd, tempName, 0)
		return -1, 0, errno
	}
	return fd, gen, 0
}

// Link makes name in dir, whose fd pfd the caller prepared (dirRel: dir's
// workspace path), a hard link to src, the object held by fd (an O_PATH
// fd the caller opened and verified); st is the object after. A
// credential is refused as the link's source as well as its name, and a
// symlink's target judged again from its new directory. linked: the link
// was made (an error after it is the look at the object since).
func (o *Ops[N]) Link(ctx context.Context, dir N, pfd int, dirRel, name string, src N, fd int, st *unix.Stat_t) (linked bool, _ syscall.Errno) {
	if err := dirfd.Fstat(fd, st); err != nil {
		return false, dirfd.Errno(err)
	}
	// Another name of a protected file would be one to write it by.
	if errno := o.Gate.DenySelf(ctx, "link", src, st, true); errno != 0 {
		return false, errno
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		// The link's target resolves from its new directory too.
		if errno := o.Gate.DenyLinkTarget(ctx, "link", dir, name, fd, guard.PathDepth(dirRel)); errno != 0 {
			return false, errno
		}
	}
	if errno := o.takeName(ctx, "link", admit.Join(dirRel, name)); errno != 0 {
		return false, errno
	}
	rec := o.Journal.Record(ctx, "", journal.OpLink, src.Rel(""))
	rec.To, rec.Before = admit.Join(dirRel, name), journal.ObjectOf(st)
	c, errno := o.Journal.Begin(ctx, "link", rec.To, rec, journal.NoKeep)
	if errno != 0 {
		return false, errno
	}
	err := o.Gate.Guard.OwnChange([]int{fd}, func() error { return dirfd.Link(fd, pfd, name) })
	o.Journal.End(c, err, nil)
	if err != nil {
		return false, dirfd.Errno(err)
	}
	if err := dirfd.Fstat(fd, st); err != nil {
		return true, dirfd.Errno(err)
	}
	// A file the mount may read, linked onto a credential name, holds what
	// the caller could read already: made through the mount.
	o.Gate.Guard.MadeNew(admit.Join(dirRel, name), st, src.FileID().Gen)
	return true, 0
}
