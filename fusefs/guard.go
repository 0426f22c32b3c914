package fusefs

import (
	"context"
	"path"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/locks"
)

// The guard's adapters. The admission decisions are fusefs/guard's, as
// functions of the policy, workspace paths and identities; what is here
// builds a node's path from go-fuse's tree (relPath, dirRel), asks the
// guard, and audits and answers what it refuses (refuse*: the audit lines
// and errnos are the mount's). The other files call the methods and
// functions here, by the names they had before the rules moved, so that
// a check lives in one place and the write engine needs no guard of its
// own.
//
// Credential denial. The policy's matcher is asked about the canonical
// workspace-relative path of the object an operation touches: the node's
// own place in the tree, which for an object reached through a symlink is
// the symlink's target. Escape checks (dirfd, verify, staysInside) come
// first, so an escaping credential path reports PATH_ESCAPE.

// madeView is the made set as the write engine asks it (inplace.go: may
// a file be a made one).
type madeView struct{ set *guard.MadeSet }

// holds reports whether a file with key may be a made one (no system
// call: guard.MadeSet.Holds).
func (v madeView) holds(key locks.Key) bool { return v.set.Holds(key) }

// credentialDenied reports whether rel is a credential under the policy.
func (f *FS) credentialDenied(rel string) bool { return f.guard.Denied(rel) }

// hiding reports whether denied entries vanish from lookup and listings.
func (f *FS) hiding() bool { return f.guard.Hiding() }

// denyPath refuses op on name in dir if its path is a credential: a name
// an operation makes without prepare's judgement (a hidden credential
// mkdir would say exists). Every check of an operation on a node itself
// (open, truncate, setattr, xattrs, link, copy_file_range) is denySelf's.
func (f *FS) denyPath(ctx context.Context, op string, dir *Node, name string) syscall.Errno {
	if !f.guard.On() {
		return 0
	}
	if rel := f.relPath(dir, name); f.guard.Denied(rel) {
		return f.refuseCredential(ctx, op, rel, rel)
	}
	return 0
}

// refuseName audits and answers the rule that refuses op on the name at
// rel, if any (guard.Guard.JudgeName, JudgeRename): the audit lines are
// refuseCredential and refuseRel by the path refused.
func (f *FS) refuseName(ctx context.Context, op, rel string, rule guard.NameRule) syscall.Errno {
	switch rule {
	case guard.NameCredential:
		return f.refuseCredential(ctx, op, rel, rel)
	case guard.NameProtected:
		return f.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtected)
	}
	return 0
}

// denySelf is the guard's check of an operation on n itself, after its
// fd is verified (guard.Guard.JudgeSelf): a credential by path and by
// identity, unless made through the mount and unchanged since (st, when
// not nil, is the fd's stat: the identity n stands for (verify), which is
// read from n with its generation, and its size and mtime), and, when the
// operation changes n or names it anew (changes: a write open, truncate,
// setattr, an xattr change, a link's source), the protect rule. It costs
// no system call.
func (f *FS) denySelf(ctx context.Context, op string, n *Node, st *unix.Stat_t, changes bool) syscall.Errno {
	if !f.guard.On() {
		return 0
	}
	rel := f.relPath(n, "")
	credential, rule := f.guard.JudgeSelf(rel, n.fileID(), st, n.IsDir(), changes)
	if credential {
		return f.refuseCredential(ctx, op, rel, rel)
	}
	return f.refuseProtect(ctx, op, rel, rule)
}

// noteLookup records a credential file's identity (st's dev and ino, and
// gen, its generation) as lookup finds it, and a protected file's, and
// says whether the entry must be hidden (guard.NoteLookup).
//
// The workspace path is built only when the answer can matter: for a
// regular file (its identity may need recording) or when denied entries are
// hidden. Lookup is the hottest operation of the mount.
func (f *FS) noteLookup(dir *Node, name string, st *unix.Stat_t, gen uint64) (rel string, hide bool) {
	regular := st.Mode&syscall.S_IFMT == syscall.S_IFREG
	if !f.guard.On() || !(regular || f.guard.Hiding()) {
		return "", false
	}
	rel = f.relPath(dir, name)
	return rel, f.guard.NoteLookup(rel, st, gen)
}

// The files made through the mount (guard.MadeSet): recorded where the
// mount makes or moves one at a credential path, carried by commits,
// restamped by the mount's own changes.

// madeNew records the object a create, mknod or mkdir made at rel, st its
// stat and gen its generation, as made through the mount (guard.MadeNew).
func (f *FS) madeNew(rel string, st *unix.Stat_t, gen uint64) { f.guard.MadeNew(rel, st, gen) }

// ownMadeChange runs change, a change the mount makes that moves the ctime
// of the files held by fds (an fd of -1 is skipped), restamping each made
// file so that the mount's own change does not make it host-placed
// (guard.OwnChange). It returns change's error.
func (f *FS) ownMadeChange(fds []int, change func() error) error {
	return f.guard.OwnChange(fds, change)
}

// madeFd opens name in the directory held by dir (O_PATH) when it may be
// a made file, for ownMadeChange, or returns -1 (closing it is harmless:
// EBADF).
func (f *FS) madeFd(dir int, name string) int { return f.guard.MadeFd(dir, name) }

// madeRenamed records the file a rename put at name in the directory held
// by pfd (rel, its workspace path) as made through the mount when that is
// a credential path (guard.MadeRenamed).
func (f *FS) madeRenamed(pfd int, rel, name string) { f.guard.MadeRenamed(pfd, rel, name) }

// madeCommitted carries a made file to the file a commit put in its place
// (old replaced by new, whose stat is st): the mount's own write.
func (f *FS) madeCommitted(old, new locks.FileID, st *unix.Stat_t) {
	f.guard.Made.Carry(old, new, st)
}

// waitScan returns once the mount-time scan has finished (at once with no
// policy): for an op that asks the identity sets under nsMu.
func (f *FS) waitScan() { f.guard.WaitScan() }

// denyDirRename refuses renaming name in dir (whose verified fd is pfd) to
// newRel, the workspace path it gets, when the move could release a
// credential or plant a protected path: a directory judged by what it
// holds, a symlink renamed to a protected prefix (guard.DirRename). The
// name itself, when it is not a directory, is judged by prepare.
//
// rel is the name's workspace path now, dir its directory's node. A scan
// needs nsMu held exclusively through the rename (Node.Rename), so that no
// name enters the tree scanned before the rename is done: without it
// (exclusive false), again says to come back with it.
func (f *FS) denyDirRename(ctx context.Context, dir *Node, pfd int, name, rel, newRel string, exclusive bool) (errno syscall.Errno, again bool) {
	found, again, err := f.guard.DirRename(pfd, name, rel, newRel, exclusive, hiddenName)
	switch {
	case again:
		return 0, true
	case isEscape(err):
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeResolve), false // a mount point, or swapped
	case err != nil:
		return toErrno(err), false
	case found.Path != "" && found.Protected:
		return f.refuseRel(ctx, "rename", found.Path, errcode.ProtectedPathDenied, RuleProtected), false
	case found.Path != "":
		return f.refuseCredential(ctx, "rename", found.Path, found.Path), false
	case found.Unscanned:
		return f.refuseRel(ctx, "rename", rel, errcode.CredentialPathDenied, RuleCredentialUnscanned), false
	}
	return 0, false
}

// Planting. A protected path (policy.Matcher.Protected: host configuration
// a program of the host executes or trusts, such as .git/hooks/pre-commit
// or .envrc) may be read through the mount but not made, written,
// truncated, renamed or linked onto, nor have its metadata changed; every
// route that puts bytes or a name at a path checks the path the object
// has after the operation: prepare (create, mknod, symlink, link, rename's
// target), the write open, truncate, setattr and xattr changes
// (prepareSelf), both names of an exchange, a directory renamed with
// protected paths beneath its new name (denyDirRename), a symlink named
// like a protected directory (denySymlinkPlant), and the commit of a write
// whose file was moved since it was opened (denyCommit). A protected file
// is protected under every name the host gave it: the scan and every
// lookup record its identity (guard.Guard.ProtIDs), which every check of
// a change to a node itself asks (denySelf, denyCommit).

// denyCommit re-checks the protect rule on the place a write is about to
// commit to (guard.CommitProtected), under the entry's lock.
func (f *FS) denyCommit(ctx context.Context, w *pendingWrite) syscall.Errno {
	if !f.guard.On() {
		return 0
	}
	rel := joinRel(f.dirRel(w.Dir(), w.DirFd()), w.Name())
	return f.refuseProtect(ctx, "commit", rel, f.guard.CommitProtected(rel, w.Node().fileID()))
}

// refuseProtect audits and answers the protect rule that refuses op on
// rel, if any.
func (f *FS) refuseProtect(ctx context.Context, op, rel string, rule guard.ProtectRule) syscall.Errno {
	switch rule {
	case guard.ProtectedPath:
		return f.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtected)
	case guard.ProtectedIdentity:
		return f.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtectedIdentity)
	}
	return 0
}

// ScanResult is what the mount-time scan found.
type ScanResult = guard.ScanResult

// Scan walks the backing tree once at mount (guard.Guard.Scan): it records
// the identity of every credential and protected file, and removes the
// temp files of atomic writes that a crash left behind (every temp this
// mount is not using; conflict copies are never touched). It runs while
// the mount serves (ScanInBackground); what could meet a crash's temp
// before the walk reaches it sweeps that directory itself
// (sweepBeforeRmdir).
func (f *FS) Scan() ScanResult {
	return f.guard.Scan(f.rootFd, hiddenName, f.removeCrashTemp)
}

// ScanInBackground runs Scan on a goroutine of its own and hands report its
// result. Close waits for it: a daemon unmounted at once still removes
// every temp a crash left, and the walk never meets a closed root fd.
func (f *FS) ScanInBackground(report func(ScanResult)) {
	f.scanning.Add(1)
	go func() {
		defer f.scanning.Done()
		report(f.Scan())
	}()
}

// removeCrashTemp removes the temp name in the directory held by dir if a
// crash left it: a regular file, not one this mount is using.
func (f *FS) removeCrashTemp(dir int, name string) bool {
	var st unix.Stat_t
	return !f.engine.IsOwnTemp(name) && dirfd.Lstat(dir, name, &st) == nil &&
		st.Mode&syscall.S_IFMT == syscall.S_IFREG && dirfd.Unlink(dir, name, 0) == nil
}

// sweepBeforeRmdir removes the temps a crash left in directory name of the
// directory held by pfd, while the mount-time sweep may not have reached
// it: an rmdir of a directory that looks empty on the mount must not fail
// ENOTEMPTY on a hidden name the sweep is about to remove. It reports
// whether it removed any.
func (f *FS) sweepBeforeRmdir(pfd int, name string) bool {
	select {
	case <-f.guard.Scanned():
		return false // swept: a temp left is in use
	default:
	}
	fd, err := dirfd.OpenDir(pfd, name)
	if err != nil {
		return false
	}
	defer dirfd.Close(fd)
	ents, err := dirfd.ReadDir(fd)
	if err != nil {
		return false
	}
	removed := false
	for _, d := range ents {
		if hiddenName(d.Name) && f.removeCrashTemp(fd, d.Name) {
			removed = true
		}
	}
	return removed
}

// Symlinks are judged by where they resolve (fusefs/guard's symlink.go
// says the rule: every target normal, climbing no higher than its
// directory is deep); what is here refuses what the rule does not let
// through.

// staysInside reports whether target, the target of a symlink in a
// directory depth levels below the root, is normal and climbs no higher
// than the root (guard.StaysInside).
func staysInside(depth int, target string) bool { return guard.StaysInside(depth, target) }

// pathDepth is the number of names in the workspace path rel.
func pathDepth(rel string) int { return guard.PathDepth(rel) }

// denySymlink refuses a symlink to target made at name in n, whose
// workspace path is dir (guard.Guard.JudgeSymlink): a target that escapes
// (PATH_ESCAPE), a credential target (the audit line names the glob that
// denies the target), a link at a protected directory prefix
// (PROTECTED_PATH_DENIED).
func (f *FS) denySymlink(ctx context.Context, n *Node, dir, name, target string) syscall.Errno {
	rel := joinRel(dir, name)
	switch rule, matched := f.guard.JudgeSymlink(f.rootFd, dir, rel, target, hiddenName); rule {
	case guard.SymlinkEscapes:
		return f.refuse(ctx, "symlink", n, name, errcode.PathEscape, RuleEscapeSymlinkTarget)
	case guard.SymlinkCredential:
		return f.refuseCredential(ctx, "symlink", rel, matched)
	case guard.SymlinkPlants:
		return f.refuseRel(ctx, "symlink", rel, errcode.ProtectedPathDenied, RuleProtected)
	}
	return 0
}

// denyLinkTarget refuses op when the symlink held by fd (an O_PATH fd of
// the verified link) would climb out of the root from a directory depth
// levels deep: a hard link of a symlink gives it a new directory to
// resolve from.
func (f *FS) denyLinkTarget(ctx context.Context, op string, dir *Node, name string, fd, depth int) syscall.Errno {
	ok, err := guard.LinkFdStaysInside(fd, depth)
	if err != nil {
		return toErrno(err)
	}
	if !ok {
		return f.refuse(ctx, op, dir, name, errcode.PathEscape, RuleEscapeSymlinkTarget)
	}
	return 0
}

// denyLinkMove refuses renaming name in dir (held by pfd) from oldRel to
// newRel (workspace paths, as the kernel has them now) when that would
// leave a symlink climbing out of the root, or when a directory moved
// shallower cannot be scanned whole (guard.LinkMoved). The scan needs
// nsMu held exclusively, or a link could be made in the directory between
// the scan and the rename: without it, again says to come back with it.
func (f *FS) denyLinkMove(ctx context.Context, dir *Node, pfd int, name, oldRel, newRel string, exclusive bool) (_ syscall.Errno, again bool) {
	mv, again, err := guard.LinkMoved(pfd, name, oldRel, newRel, exclusive)
	switch {
	case again:
		return 0, true
	case mv.Dir && isEscape(err):
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeResolve), false
	case err != nil:
		return toErrno(err), false
	case mv.Escapes:
		return f.refuse(ctx, "rename", dir, path.Join(name, mv.Path), errcode.PathEscape, RuleEscapeSymlinkTarget), false
	case mv.Unscanned:
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeUnscanned), false
	}
	return 0, false
}

// Host meaning: the allowlists of mode bits and xattrs are fusefs/guard's
// (hostmode.go says what they let through and why); what is here audits
// what they refuse.

// allowedXattr reports whether the mount may set attr (guard.AllowedXattr).
func allowedXattr(attr string) bool { return guard.AllowedXattr(attr) }

// removableXattr reports whether the mount may remove attr
// (guard.RemovableXattr).
func removableXattr(attr string) bool { return guard.RemovableXattr(attr) }

// newHostMode is mode (permission bits of a new object of type typ) within
// the allowlist; a set-ID bit it drops is audited (the create goes on:
// natively the object would be made, and its mode shows what it got).
func (f *FS) newHostMode(ctx context.Context, n *Node, op, name string, typ, mode uint32) uint32 {
	allowed := mode & guard.AllowedModeBits(typ)
	if allowed != mode {
		f.refuseAs(ctx, op, n, name, errcode.PrivilegeDenied, 0, RulePrivilegeSetID)
	}
	return allowed
}

// denyChmod refuses a chmod of n (of type typ) to a mode outside the
// allowlist (guard.ChmodAllowed).
func (f *FS) denyChmod(ctx context.Context, n *Node, typ, mode uint32) syscall.Errno {
	if guard.ChmodAllowed(typ, mode) {
		return 0
	}
	return f.refuse(ctx, "setattr", n, "", errcode.PrivilegeDenied, RulePrivilegeSetID)
}

// Modes of new objects. The mount negotiates FUSE_DONT_MASK (MountOptions):
// the kernel sends the mode the caller asked for, without its umask, and
// the daemon, whose own umask is 0 (realmfs sets it at start), applies the
// rule the kernel applies natively on a filesystem with POSIX ACLs
// (guard.NewMode: a parent's default ACL decides, else the umask). Without
// DONT_MASK the kernel would apply the umask itself even under a default
// ACL, and with the daemon's own umask on top a group-shared tree (umask
// 002) would lose group write.
//
// The kernel sends the caller's umask with every CREATE, MKDIR and MKNOD
// (current_umask(), whatever DONT_MASK says), but go-fuse's node API does
// not pass it on: the mount's raw filesystem notes it for the request
// (fusefs/requestnotes). Where the note is missing (a request that did not
// come through the mount's raw filesystem) the caller's umask is read from
// /proc/PID/status (guard.ProcUmask), which is the same umask: the thread
// is blocked in the system call it runs under. The note spares a create
// the twelve system calls of reading that file.

// newMode is the mode (permission and set-ID bits, without the type) an
// object made with mode by the caller in the directory held by pfd gets
// natively.
func (f *FS) newMode(ctx context.Context, pfd int, mode uint32) uint32 {
	return guard.NewMode(pfd, mode, func() uint32 { return f.callerUmask(ctx) })
}

// callerUmask is the umask of the process that made the request in ctx; 0
// for a request that did not come from the kernel (the unit tests).
func (f *FS) callerUmask(ctx context.Context) uint32 {
	c, ok := fuse.FromContext(ctx)
	if !ok || c == nil {
		return 0
	}
	if c.Pid == 0 {
		return guard.UmaskUnknown
	}
	if u, ok := f.umasks.Of(ctx); ok {
		return u
	}
	return guard.ProcUmask(c.Pid)
}

// hiddenEntry returns the filter for listing directory n: realm's temp
// files always, credentials too when the policy hides them.
func (f *FS) hiddenEntry(n *Node) func(name string) bool {
	if !f.hiding() {
		return hiddenName
	}
	return func(name string) bool {
		return hiddenName(name) || f.credentialDenied(f.relPath(n, name))
	}
}
