package fusefs

import (
	"context"
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// Credential denial. The policy's matcher is asked about the canonical
// workspace-relative path of the object an operation touches: the node's
// own place in the tree, which for an object reached through a symlink is
// the symlink's target. Escape checks (dirfd, verify, staysInside) come
// first, so an escaping credential path reports PATH_ESCAPE.

// credentialDenied reports whether rel is a credential under the policy.
func (f *FS) credentialDenied(rel string) bool {
	return f.opts.Credentials != nil && f.opts.Credentials.Denied(rel)
}

// denyPath refuses op on name in dir, or on dir itself when name is "", if
// it is a credential: by its path, and for dir itself also by its identity
// (credential). Every check of an operation on a node (open, truncate,
// setattr, xattrs, link, copy_file_range) comes here. A file made through
// the mount (madeSet) is no credential under any name: what it holds its
// writers had.
func (f *FS) denyPath(ctx context.Context, op string, dir *Node, name string) syscall.Errno {
	return f.denyPathStat(ctx, op, dir, name, nil)
}

// denyPathStat is denyPath with st, when not nil, the backing file dir
// stands for as an open just found it: a file made through the mount that
// was changed behind it since (its size or mtime differ) is host-placed
// again, and refused.
func (f *FS) denyPathStat(ctx context.Context, op string, dir *Node, name string, st *unix.Stat_t) syscall.Errno {
	if f.opts.Credentials == nil {
		return 0
	}
	rel := f.relPath(dir, name)
	byPath := f.credentialDenied(rel)
	if name == "" {
		id := dir.fileID()
		switch f.made.check(id, st) {
		case madeFresh:
			return 0
		case madeChanged:
			f.creds.add(id) // host-placed from now on, under every name
		}
		if byPath || f.creds.has(id) {
			return f.refuseCredential(ctx, op, rel, rel)
		}
		return 0
	}
	if byPath {
		return f.refuseCredential(ctx, op, rel, rel)
	}
	return 0
}

// denyName is the credential check of a name an operation moves or makes
// (prepare): a credential path is refused unless nothing is there yet and
// the operation makes it (what a process makes holds what it had), or what
// is there is a file made through the mount and unchanged since. A host's
// credential is never opened, renamed or replaced through the mount.
//
// rel is the name's workspace path as the kernel has it now (FS.dirRel).
func (f *FS) denyName(ctx context.Context, op, rel string, pfd int, name string, use nameUse) syscall.Errno {
	if f.opts.Credentials == nil {
		return 0
	}
	if !f.credentialDenied(rel) {
		return 0
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	switch {
	case errors.Is(err, syscall.ENOENT) && use == makes && !f.hiding():
		return 0
	case err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG:
		if f.made.check(fileID{keyOf(&st), gen}, &st) == madeFresh {
			return 0
		}
	}
	return f.refuseCredential(ctx, op, rel, rel)
}

// madeNew records the object a create, mknod or mkdir made at rel, st its
// stat and gen its generation, as made through the mount: a file when rel
// is a credential path, a directory when rel is protected (elsewhere
// nothing asks).
func (f *FS) madeNew(rel string, st *unix.Stat_t, gen uint64) {
	if f.opts.Credentials == nil {
		return
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		if f.credentialDenied(rel) {
			f.made.add(fileID{keyOf(st), gen}, st)
		}
	case syscall.S_IFDIR:
		if f.opts.Credentials.Protected(rel) {
			f.madeDirs.add(fileID{keyOf(st), gen})
		}
	}
}

// Made through the mount. A credential glob names files the host placed
// in BACKING; a file a process on the mount created holds only what its
// writers already had, so reading it back is no leak: `git clone` of a
// repository with test/fixtures/server.key, `npm install` of a package
// that ships test keys, a generated .env. The set holds the identity of
// every file made through the mount at a credential path (create, mknod, a
// link or rename of a file the mount could read onto such a name), and
// follows it through commits (FS.madeCommitted: the temp that replaces it
// is made through the mount too) and through every other change the mount
// makes to it (ownMadeChange). Each entry keeps the file's size, mtime and
// ctime as the mount last left them: a file changed behind the mount (the
// host wrote it in BACKING) no longer matches at its next open or lookup,
// and is host-placed again, a credential under every name. The ctime is
// what the host cannot set back: `cp -p secret .env` over a made .env of
// the same size restores the mtime, never the ctime. A file the host
// replaced is another identity, never in the set. The set outlives the
// mount only in the daemon's own state, outside BACKING (madestore.go):
// nothing in BACKING could be trusted to say a file was made, since a
// process on the mount writes BACKING's files and their xattrs.
type madeSet struct {
	mu  lockorder.Mutex[lockorder.MadeSetMu]
	set map[locks.Key]madeStamp
}

// madeStamp is what a made file looked like when the mount last changed it.
type madeStamp struct {
	gen        uint64
	size       int64
	mtim, ctim unix.Timespec
}

func stampOf(gen uint64, st *unix.Stat_t) madeStamp {
	return madeStamp{gen: gen, size: st.Size, mtim: st.Mtim, ctim: st.Ctim}
}

// madeState is what check says of a file.
type madeState int

const (
	notMade     madeState = iota
	madeFresh             // made through the mount, unchanged behind it
	madeChanged           // was made through the mount; changed behind it since: dropped
)

func (s *madeSet) add(id fileID, st *unix.Stat_t) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = make(map[locks.Key]madeStamp)
	}
	s.set[id.key] = stampOf(id.gen, st)
}

// holds reports whether a file with key may be in the set (whatever its
// generation): a look with no system call, before a change's stat.
func (s *madeSet) holds(key locks.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.set[key]
	return ok
}

// check says whether id was made through the mount, and, with st (the
// file as just found), whether it is still as the mount left it: its
// size, mtime and ctime; a changed file leaves the set.
func (s *madeSet) check(id fileID, st *unix.Stat_t) madeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.set[id.key]
	switch {
	case !ok:
		return notMade
	case m.gen != id.gen:
		delete(s.set, id.key) // the number went to another file
		return notMade
	case st != nil && stampOf(id.gen, st) != m:
		delete(s.set, id.key)
		return madeChanged
	}
	return madeFresh
}

// restamp records after as the made file id's look after a change the
// mount made to it, if before (its look just before that change) was the
// look the set had: a change behind the mount before it is never taken
// for the mount's own.
func (s *madeSet) restamp(id fileID, before, after *unix.Stat_t) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.set[id.key]; ok && m == stampOf(id.gen, before) {
		s.set[id.key] = stampOf(id.gen, after)
	}
}

// ownMadeChange runs change, a change the mount makes that moves the ctime
// of the files held by fds (a chmod, an xattr, a link or unlink of another
// name, a rename, a write in place; an fd of -1 is skipped), and restamps
// each that is a made file, so that the mount's own change does not make
// it host-placed. Each made file's look just before the change must be
// the set's (check): one changed behind the mount since its last check
// becomes host-placed here, and is not restamped. The mount's own changes
// of made files are serialized (madeOpMu), so that one's look before is
// never another's look after. A check of the file by another request
// while the change is under way sees the change and takes the file for
// host-placed (closed: a refusal, never a leak). It returns change's error.
func (f *FS) ownMadeChange(fds []int, change func() error) error {
	if f.opts.Credentials == nil || !f.anyMade(fds) {
		return change()
	}
	f.madeOpMu.Lock()
	defer f.madeOpMu.Unlock()
	type held struct {
		fd     int
		id     fileID
		before unix.Stat_t
	}
	var hs []held
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		var h held
		gen, err := dirfd.Statx(fd, "", &h.before)
		if err != nil {
			continue
		}
		h.fd, h.id = fd, fileID{keyOf(&h.before), gen}
		switch f.made.check(h.id, &h.before) {
		case madeFresh:
			hs = append(hs, h)
		case madeChanged:
			f.creds.add(h.id) // host-placed from now on, under every name
		}
	}
	err := change()
	for _, h := range hs {
		var after unix.Stat_t
		if dirfd.Fstat(h.fd, &after) == nil {
			f.made.restamp(h.id, &h.before, &after)
		}
	}
	return err
}

// madeFd opens name in the directory held by dir (O_PATH) when it may be
// a made file, for ownMadeChange, or returns -1 (closing it is harmless:
// EBADF).
func (f *FS) madeFd(dir int, name string) int {
	var st unix.Stat_t
	if f.opts.Credentials == nil || dirfd.Lstat(dir, name, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || !f.made.holds(keyOf(&st)) {
		return -1
	}
	fd, err := dirfd.OpenPath(dir, name)
	if err != nil {
		return -1
	}
	return fd
}

// anyMade reports whether a file held by one of fds may be a made file.
func (f *FS) anyMade(fds []int) bool {
	for _, fd := range fds {
		var st unix.Stat_t
		if fd >= 0 && dirfd.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && f.made.holds(keyOf(&st)) {
			return true
		}
	}
	return false
}

// madeRenamed records the file a rename put at name in the directory held
// by pfd (rel, its workspace path) as made through the mount when that is
// a credential path: the mount could read it where it was (prepare refused
// a host's credential by its name), unless it is a credential by identity.
func (f *FS) madeRenamed(pfd int, rel, name string) {
	if f.opts.Credentials == nil || !f.credentialDenied(rel) {
		return
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	id := fileID{keyOf(&st), gen}
	if f.made.check(id, nil) == notMade && !f.creds.has(id) {
		f.made.add(id, &st)
	}
}

// madeCommitted carries a made file to the file a commit put in its place
// (old replaced by new, whose stat is st): the mount's own write.
func (f *FS) madeCommitted(old, new fileID, st *unix.Stat_t) {
	s := &f.made
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.set[old.key]; ok && m.gen == old.gen {
		delete(s.set, old.key)
		s.set[new.key] = stampOf(new.gen, st)
	}
}

// hiding reports whether denied entries vanish from lookup and listings.
func (f *FS) hiding() bool {
	return f.opts.Credentials != nil && f.opts.Credentials.Hide()
}

// credInodes remembers the identity of every credential file the mount has
// seen by a denied name: a scan of the backing tree at mount, then every
// lookup. A file whose identity is here is a credential under any name it
// has or gets, whatever its link count: a hard link made outside the mount
// to ~/.ssh/id_rsa under an innocent name is refused, and stays refused
// after the credential's own name is removed or renamed, through the mount
// or in BACKING, and so is the same file seen through a bind mount.
//
// The identity is the file's (dev, ino) and its generation (birth time,
// dirfd.Statx), the fileID nodes carry: a deleted credential's inode number
// given to a new file does not make that file a credential. Where the
// backing filesystem has no birth time the generation is 0 for every file,
// and a new file with a recycled number is refused (closed, not open).
// Entries are never dropped: a credential's identity cannot stop being one.
type credInodes struct {
	mu      lockorder.RWMutex[lockorder.CredInodesMu]
	set     map[fileID]struct{}
	scanned chan struct{} // closed when the mount-time scan has finished
}

func (c *credInodes) add(id fileID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil {
		c.set = make(map[fileID]struct{})
	}
	c.set[id] = struct{}{}
}

// has waits for the mount-time scan, then looks the identity up: one map
// lookup, no system call. Every name of a file may be the credential's, so
// every check waits for the scan, not only that of a multiply-linked file (a
// bind mount shows one file, with one link, under two names).
func (c *credInodes) has(id fileID) bool {
	if c.scanned != nil {
		awaitScan(c.scanned)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.set[id]
	return ok
}

// knows is has without waiting for the mount-time scan: for a caller
// under a lock whose request waited for it already.
func (c *credInodes) knows(id fileID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.set[id]
	return ok
}

// waitScan returns once the mount-time scan has finished (at once with no
// policy): for an op that asks credInodes.has under nsMu.
func (f *FS) waitScan() {
	if f.opts.Credentials != nil && f.creds.scanned != nil {
		awaitScan(f.creds.scanned)
	}
}

// awaitScan waits for scanned to be closed, holding no realm lock if it
// has to wait: the scan may take minutes.
func awaitScan(scanned chan struct{}) {
	select {
	case <-scanned:
	default:
		lockorder.AssertNoneHeld("a wait for the mount-time scan")
		<-scanned
	}
}

// denyOpen is the guard's check of an open, after the fd is verified: a
// credential by path and by identity, unless made through the mount and
// unchanged since (st, the fd's stat, is the identity n stands for
// (verify), which denyPath reads from n with its generation, and its size
// and mtime), and for a write open a protected path. It costs no system
// call.
func (n *Node) denyOpen(ctx context.Context, op string, st *unix.Stat_t, write bool) syscall.Errno {
	if errno := n.fsys.denyPathStat(ctx, op, n, "", st); errno != 0 {
		return errno
	}
	if write {
		return n.fsys.denyProtect(ctx, op, n, "")
	}
	return 0
}

// noteLookup records a credential file's identity (st's dev and ino, and
// gen, its generation) as lookup finds it, and a protected file's, and
// says whether the entry must be hidden.
//
// The workspace path is built only when the answer can matter: for a
// regular file (its identity may need recording) or when denied entries are
// hidden. Lookup is the hottest operation of the mount.
func (f *FS) noteLookup(dir *Node, name string, st *unix.Stat_t, gen uint64) (rel string, hide bool) {
	regular := st.Mode&syscall.S_IFMT == syscall.S_IFREG
	if f.opts.Credentials == nil || !(regular || f.hiding()) {
		return "", false
	}
	rel = f.relPath(dir, name)
	if regular && f.opts.Credentials.Protected(rel) {
		f.protIDs.add(fileID{keyOf(st), gen})
	}
	if !f.credentialDenied(rel) {
		return rel, false
	}
	if regular {
		id := fileID{keyOf(st), gen}
		if f.made.check(id, st) == madeFresh {
			return rel, false // made through the mount: neither recorded nor hidden
		}
		f.creds.add(id)
	}
	return rel, f.hiding()
}

// denyDirRename refuses renaming name in dir (whose verified fd is pfd) to
// newRel, the workspace path it gets, when the move could release a
// credential or plant a protected path:
//
//   - a directory holding a credential: under the new name the file could
//     match no glob (".aws" renamed to "x" would release x/credentials);
//     files made through the mount are no credentials;
//   - a directory holding anything whose path after the move is protected
//     (mkdir m/docker, write m/docker/config.json, mv m/docker m/.docker),
//     or a symlink whose name after the move is a protected prefix;
//   - a symlink renamed to a protected prefix (ProtectedPrefix).
//
// The name itself, when it is not a directory, is judged by prepare.
//
// rel is the name's workspace path now, dir its directory's node. The
// caller holds nsMu exclusively through the rename (Node.Rename): no name
// enters the tree scanned before the rename is done.
func (f *FS) denyDirRename(ctx context.Context, dir *Node, pfd int, name, rel, newRel string, exclusive bool) (errno syscall.Errno, again bool) {
	if f.opts.Credentials == nil {
		return 0, false
	}
	var st unix.Stat_t
	if err := dirfd.Lstat(pfd, name, &st); err != nil {
		return 0, false
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		if f.opts.Credentials.ProtectedPrefix(newRel) {
			return f.refuseRel(ctx, "rename", newRel, errcode.ProtectedPathDenied, RuleProtected), false
		}
		return 0, false
	case syscall.S_IFDIR:
		if !exclusive {
			return 0, true // a scan needs nsMu exclusively
		}
	default:
		return 0, false
	}
	fd, err := dirfd.OpenDir(pfd, name)
	if isEscape(err) {
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeResolve), false // a mount point, or swapped
	}
	if err != nil {
		return toErrno(err), false
	}
	defer dirfd.Close(fd)
	seen := 0
	found, code := "", errcode.CredentialPathDenied
	err = guard.Walk(fd, rel, func(p string, parent int, d dirfd.Dirent) bool {
		seen++
		if hiddenName(d.Name) {
			return seen < guard.MaxRenameScan
		}
		after := newRel + p[len(rel):]
		switch {
		case f.credentialDenied(p) && !f.madeEntry(parent, d.Name):
			found = p
		case f.opts.Credentials.Protected(after),
			d.Type == unix.DT_LNK && f.opts.Credentials.ProtectedPrefix(after):
			found, code = after, errcode.ProtectedPathDenied
		}
		return found == "" && seen < guard.MaxRenameScan
	})
	if found != "" {
		if code == errcode.ProtectedPathDenied {
			return f.refuseRel(ctx, "rename", found, code, RuleProtected), false
		}
		return f.refuseCredential(ctx, "rename", found, found), false
	}
	if err != nil || seen >= guard.MaxRenameScan {
		return f.refuseRel(ctx, "rename", rel, errcode.CredentialPathDenied, RuleCredentialUnscanned), false
	}
	return 0, false
}

// madeEntry reports whether name in the directory held by dir is a file
// made through the mount and unchanged since.
func (f *FS) madeEntry(dir int, name string) bool {
	var st unix.Stat_t
	gen, err := dirfd.Statx(dir, name, &st)
	return err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && f.made.check(fileID{keyOf(&st), gen}, &st) == madeFresh
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
// lookup record its identity (protIDs, a credInodes like creds), which
// every check of a change to a node itself asks (denyProtect with name "",
// denyCommit).

// denyProtect refuses op on name in dir (dir itself when name is "") if
// its path is protected, and a change to dir itself if it is a protected
// file by its identity (protIDs): a hard link the host made to .envrc
// under an innocent name is .envrc. A protected directory the mount made
// (madeDirs) may have its times, mode, owner and xattrs changed: they run
// nothing, and `tar x` and `cp -a` set them on the .git/hooks they make;
// what is made in it is judged by its own path.
func (f *FS) denyProtect(ctx context.Context, op string, dir *Node, name string) syscall.Errno {
	if f.opts.Credentials == nil {
		return 0
	}
	rel := f.relPath(dir, name)
	if name == "" && dir.IsDir() && f.madeDirs.has(dir.fileID()) {
		return 0 // the mount made it: its times, mode and owner plant nothing (tar x, cp -a)
	}
	if f.opts.Credentials.Protected(rel) {
		return f.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtected)
	}
	if name == "" && !dir.IsDir() && f.protIDs.has(dir.fileID()) {
		return f.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtectedIdentity)
	}
	return 0
}

// denyProtectRel refuses op making rel, a name's workspace path as the
// kernel has it now (FS.dirRel), if it is protected.
func (f *FS) denyProtectRel(ctx context.Context, op, rel string) syscall.Errno {
	if f.opts.Credentials != nil && f.opts.Credentials.Protected(rel) {
		return f.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtected)
	}
	return 0
}

// denySymlinkPlant refuses a symlink whose path rel is a protected
// directory prefix: writes beneath it would land at its target, whose path
// the protect check sees, while a host's program reading the protected
// path follows the symlink to them.
func (f *FS) denySymlinkPlant(ctx context.Context, rel string) syscall.Errno {
	if f.opts.Credentials == nil {
		return 0
	}
	if f.opts.Credentials.ProtectedPrefix(rel) {
		return f.refuseRel(ctx, "symlink", rel, errcode.ProtectedPathDenied, RuleProtected)
	}
	return 0
}

// denyCommit re-checks the protect rule on the place a write is about to
// commit to: a descriptor opened on m/docker/config.json before its
// directory became m/.docker must not put its bytes at a protected path;
// nor into a protected file by its identity (a write opened before the
// host linked the file to .envrc commits into it in place). The write's
// open waited for the mount-time scan (denyOpen), so knows asks without
// waiting, under the entry's lock.
func (f *FS) denyCommit(ctx context.Context, w *pendingWrite) syscall.Errno {
	if f.opts.Credentials == nil {
		return 0
	}
	rel := joinRel(f.dirRel(w.fileParent, w.fileDir), w.fileName)
	if f.opts.Credentials.Protected(rel) {
		return f.refuseRel(ctx, "commit", rel, errcode.ProtectedPathDenied, RuleProtected)
	}
	if f.protIDs.knows(w.node.fileID()) {
		return f.refuseRel(ctx, "commit", rel, errcode.ProtectedPathDenied, RuleProtectedIdentity)
	}
	return 0
}

// ScanResult is what the mount-time scan found.
type ScanResult struct {
	Entries     int
	Credentials int
	TempRemoved int
	Err         error
}

// Scan walks the backing tree once at mount: it records the identity of
// every credential file (for its other names: hard links, bind mounts, the
// names it is renamed to), and removes the temp files of atomic writes that a
// crash left behind (every temp this mount is not using; conflict copies are
// never touched). Credential checks by identity (credInodes.has) wait until
// it is done. It runs while the mount serves (ScanInBackground); what could
// meet a crash's temp before the walk reaches it sweeps that directory
// itself (sweepBeforeRmdir).
func (f *FS) Scan() ScanResult {
	var res ScanResult
	defer close(f.creds.scanned)
	res.Err = guard.Walk(f.rootFd, "", func(rel string, parent int, d dirfd.Dirent) bool {
		res.Entries++
		if hiddenName(d.Name) {
			if f.removeCrashTemp(parent, d.Name) {
				res.TempRemoved++
			}
			return true
		}
		if f.opts.Credentials != nil && d.Type != unix.DT_DIR {
			f.scanEntry(parent, d.Name, rel, &res)
		}
		return true
	})
	return res
}

// scanEntry records the identity of the entry name (rel) in the directory
// held by dir if it is a regular file at a credential path or a protected
// one.
func (f *FS) scanEntry(dir int, name, rel string, res *ScanResult) {
	cred, prot := f.credentialDenied(rel), f.opts.Credentials.Protected(rel)
	if !cred && !prot {
		return
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(dir, name, &st)
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	if cred {
		f.creds.add(fileID{keyOf(&st), gen})
		res.Credentials++
	}
	if prot {
		f.protIDs.add(fileID{keyOf(&st), gen})
	}
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
	return !f.isOwnTemp(name) && dirfd.Lstat(dir, name, &st) == nil &&
		st.Mode&syscall.S_IFMT == syscall.S_IFREG && dirfd.Unlink(dir, name, 0) == nil
}

// sweepBeforeRmdir removes the temps a crash left in directory name of the
// directory held by pfd, while the mount-time sweep may not have reached
// it: an rmdir of a directory that looks empty on the mount must not fail
// ENOTEMPTY on a hidden name the sweep is about to remove. It reports
// whether it removed any.
func (f *FS) sweepBeforeRmdir(pfd int, name string) bool {
	select {
	case <-f.creds.scanned:
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
