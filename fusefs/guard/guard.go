package guard

import (
	"errors"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/policy"
)

// Guard is one mount's credential and protect state: the policy and the
// identity sets it has learned. Its checks take workspace-relative paths
// (the canonical path of the object an operation touches: for an object
// reached through a symlink, the symlink's target) and identities; the
// caller audits what they refuse. Escape checks come first (the caller's),
// so an escaping credential path reports PATH_ESCAPE.
//
// With no policy (Policy nil) nothing is a credential nor protected, and
// no check costs a system call.
type Guard struct {
	Policy   *policy.Matcher
	Creds    IDs     // credentials by identity: the scan and every lookup
	ProtIDs  IDs     // protected files by identity, as Creds holds credentials'
	MadeDirs IDs     // protected directories made through the mount: no scan to wait for
	Made     MadeSet // files made through the mount at credential paths

	// madeOpMu serializes the mount's own changes of files it made at
	// credential paths (OwnChange): each one's stat before and after.
	madeOpMu lockorder.Mutex[lockorder.MadeOpMu]
	// saving serializes SaveStore.
	saving lockorder.Mutex[lockorder.StoreMu]

	// scanEntries counts the entries the mount-time scan has walked so far
	// (realmfs status, while a large tree is scanned).
	scanEntries atomic.Int64
}

// ScanEntries is how many entries the mount-time scan has walked so far.
func (g *Guard) ScanEntries() int64 { return g.scanEntries.Load() }

// StartScan makes the identity checks (Creds.Has, ProtIDs.Has) wait for
// the mount-time scan until scanDone: one scan records both.
func (g *Guard) StartScan() {
	g.Creds.scanned = make(chan struct{})
	g.ProtIDs.scanned = g.Creds.scanned
}

// scanDone ends StartScan's wait.
func (g *Guard) scanDone() { close(g.Creds.scanned) }

// Scanned is closed once the mount-time scan has finished (nil before
// StartScan).
func (g *Guard) Scanned() <-chan struct{} { return g.Creds.scanned }

// WaitScan returns once the mount-time scan has finished (at once with no
// policy): for an op that asks IDs.Has under a lock.
func (g *Guard) WaitScan() {
	if g.Policy != nil && g.Creds.scanned != nil {
		AwaitScan(g.Creds.scanned)
	}
}

// On reports whether there is a policy to judge by.
func (g *Guard) On() bool { return g.Policy != nil }

// Denied reports whether rel is a credential path under the policy.
func (g *Guard) Denied(rel string) bool { return g.Policy != nil && g.Policy.Denied(rel) }

// Protected reports whether rel is a protected path under the policy.
func (g *Guard) Protected(rel string) bool { return g.Policy != nil && g.Policy.Protected(rel) }

// ProtectedPrefix reports whether rel is a protected directory prefix: a
// symlink there would lead a protected path elsewhere.
func (g *Guard) ProtectedPrefix(rel string) bool {
	return g.Policy != nil && g.Policy.ProtectedPrefix(rel)
}

// Hiding reports whether denied entries vanish from lookup and listings.
func (g *Guard) Hiding() bool { return g.Policy != nil && g.Policy.Hide() }

// SelfDenied is the credential check of an object itself, at rel with
// identity id: a credential by its path or by its identity, unless made
// through the mount and unchanged since. st, when not nil, is the object
// as an open just found it: a made file changed behind the mount since
// (its size, mtime or ctime differ) is host-placed again, under every
// name, and refused.
func (g *Guard) SelfDenied(rel string, id ID, st *unix.Stat_t) bool {
	if g.Policy == nil {
		return false
	}
	byPath := g.Denied(rel)
	switch g.Made.Check(id, st) {
	case MadeFresh:
		return false
	case MadeChanged:
		g.Creds.Add(id) // host-placed from now on, under every name
	}
	return byPath || g.Creds.Has(id)
}

// NameDenied is the credential check of a name an operation moves or
// makes, rel its workspace path and name its entry in the directory held
// by pfd: a credential path is refused unless nothing is there yet and the
// operation makes it (makes; what a process makes holds what it had, but
// a hiding mount says nothing of what is not there), or what is there is
// a file made through the mount and unchanged since. A host's credential
// is never opened, renamed or replaced through the mount.
func (g *Guard) NameDenied(rel string, pfd int, name string, makes bool) bool {
	if !g.Denied(rel) {
		return false
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	switch {
	case errors.Is(err, syscall.ENOENT) && makes && !g.Hiding():
		return false
	case err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG:
		if g.Made.Check(ID{Key: locks.KeyOf(&st), Gen: gen}, &st) == MadeFresh {
			return false
		}
	}
	return true
}

// NoteLookup records, as lookup finds the entry at rel (st its stat, gen
// its generation), a protected file's identity and a credential's, and
// says whether the entry must be hidden. A file made through the mount is
// neither recorded nor hidden.
func (g *Guard) NoteLookup(rel string, st *unix.Stat_t, gen uint64) (hide bool) {
	if g.Policy == nil {
		return false
	}
	regular := st.Mode&syscall.S_IFMT == syscall.S_IFREG
	id := ID{Key: locks.KeyOf(st), Gen: gen}
	if regular && g.Policy.Protected(rel) {
		g.ProtIDs.Add(id)
	}
	if !g.Policy.Denied(rel) {
		return false
	}
	if regular {
		if g.Made.Check(id, st) == MadeFresh {
			return false
		}
		g.Creds.Add(id)
	}
	return g.Hiding()
}

// MadeNew records the object a create, mknod or mkdir made at rel, st its
// stat and gen its generation, as made through the mount: a file when rel
// is a credential path, a directory when rel is protected (elsewhere
// nothing asks).
func (g *Guard) MadeNew(rel string, st *unix.Stat_t, gen uint64) {
	if g.Policy == nil {
		return
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		if g.Policy.Denied(rel) {
			g.Made.Add(ID{Key: locks.KeyOf(st), Gen: gen}, st)
		}
	case syscall.S_IFDIR:
		if g.Policy.Protected(rel) {
			g.MadeDirs.Add(ID{Key: locks.KeyOf(st), Gen: gen})
		}
	}
}

// MadeRenamed records the file a rename put at name in the directory held
// by pfd (rel, its workspace path) as made through the mount when that is
// a credential path: the mount could read it where it was (the rename's
// name check refused a host's credential), unless it is a credential by
// identity.
func (g *Guard) MadeRenamed(pfd int, rel, name string) {
	if !g.Denied(rel) {
		return
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	id := ID{Key: locks.KeyOf(&st), Gen: gen}
	if g.Made.Check(id, nil) == NotMade && !g.Creds.Has(id) {
		g.Made.Add(id, &st)
	}
}

// madeEntry reports whether name in the directory held by dir is a file
// made through the mount and unchanged since.
func (g *Guard) madeEntry(dir int, name string) bool {
	var st unix.Stat_t
	gen, err := dirfd.Statx(dir, name, &st)
	return err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && g.Made.Check(ID{Key: locks.KeyOf(&st), Gen: gen}, &st) == MadeFresh
}

// ProtectRule is which protect rule refuses a change.
type ProtectRule int

const (
	NotProtected      ProtectRule = iota
	ProtectedPath                 // the path is protected
	ProtectedIdentity             // the file is protected under another name
)

func (r ProtectRule) String() string {
	switch r {
	case ProtectedPath:
		return "protected path"
	case ProtectedIdentity:
		return "protected identity"
	}
	return "not protected"
}

// SelfProtected is the protect check of a change to an object itself, at
// rel with identity id: its path, and, for what is no directory, its
// identity (a hard link the host made to .envrc under an innocent name is
// .envrc). A protected directory the mount made may have its times, mode,
// owner and xattrs changed: they run nothing, and `tar x` and `cp -a` set
// them on the .git/hooks they make; what is made in it is judged by its
// own path.
func (g *Guard) SelfProtected(rel string, id ID, isDir bool) ProtectRule {
	if g.Policy == nil {
		return NotProtected
	}
	if isDir && g.MadeDirs.Has(id) {
		return NotProtected
	}
	if g.Policy.Protected(rel) {
		return ProtectedPath
	}
	if !isDir && g.ProtIDs.Has(id) {
		return ProtectedIdentity
	}
	return NotProtected
}

// JudgeSelf is the check of an operation on an object itself (an open, a
// truncate, a link's source, a change of its metadata or xattrs), at rel
// with identity id, st as the operation just found it (nil: not looked
// at): a credential (SelfDenied) first, then, when the operation changes
// the object or gives it another name (changes), the protect rule
// (SelfProtected). credential true refuses before any protect rule.
func (g *Guard) JudgeSelf(rel string, id ID, st *unix.Stat_t, isDir, changes bool) (credential bool, _ ProtectRule) {
	if g.SelfDenied(rel, id, st) {
		return true, NotProtected
	}
	if changes {
		return false, g.SelfProtected(rel, id, isDir)
	}
	return false, NotProtected
}

// CommitProtected is the protect check of the place a write is about to
// commit to, rel, of the file id: a descriptor opened on
// m/docker/config.json before its directory became m/.docker must not put
// its bytes at a protected path, nor into a protected file by its identity
// (a write opened before the host linked the file to .envrc commits into
// it in place). The write's open waited for the mount-time scan, so it
// asks without waiting (Knows), under the entry's lock.
func (g *Guard) CommitProtected(rel string, id ID) ProtectRule {
	switch {
	case g.Policy == nil:
		return NotProtected
	case g.Policy.Protected(rel):
		return ProtectedPath
	case g.ProtIDs.Knows(id):
		return ProtectedIdentity
	}
	return NotProtected
}

// scanEntry records the identity of the entry name (rel) in the directory
// held by dir if it is a regular file at a credential path or a protected
// one, for the mount-time scan; it reports whether it recorded a
// credential.
func (g *Guard) scanEntry(dir int, name, rel string) (credential bool) {
	if g.Policy == nil {
		return false
	}
	cred, prot := g.Policy.Denied(rel), g.Policy.Protected(rel)
	if !cred && !prot {
		return false
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(dir, name, &st)
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return false
	}
	if cred {
		g.Creds.Add(ID{Key: locks.KeyOf(&st), Gen: gen})
	}
	if prot {
		g.ProtIDs.Add(ID{Key: locks.KeyOf(&st), Gen: gen})
	}
	return cred
}
