package guard

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// The admission of an operation on a name: what it does with the name
// (Use) decides which checks judge it, in one order, and the first that
// refuses answers. fusefs runs the steps (Node.prepare): AdmitEntry before
// it opens the name's directory, then JudgeName (or JudgeRename) on the
// name's workspace path as the kernel has it now; escapes come between
// the two (the directory's verified fd), so an escaping credential path
// reports PATH_ESCAPE. A symlink made is judged after its name, by its
// target (JudgeSymlink, by the rule of symlink.go).

// Use says what an operation does with the name it is given, which
// decides how its admission refuses it.
type Use int

const (
	// Removes: the op needs the name to exist and only removes it
	// (unlink, rmdir); its path is not judged (the policy denies a
	// credential's opens, creates, renames and links, not its removal).
	Removes Use = iota
	// MovesFrom: the op needs the name to exist and moves it away
	// (rename's source, and both names of an exchange).
	MovesFrom
	// Makes: the op makes the name (create, mknod, symlink, link, rename's
	// target).
	Makes
	// MakesDir: mkdir. A directory is judged by what it holds, each name
	// in it as it is made or opened, not by its own name: a policy may
	// allow .aws/config beneath a denied .aws/**, and the directory must
	// be makeable to hold it.
	MakesDir
)

func (u Use) String() string {
	switch u {
	case Removes:
		return "removes"
	case MovesFrom:
		return "moves from"
	case Makes:
		return "makes"
	case MakesDir:
		return "makes a directory"
	}
	return "unknown use"
}

// RenameTarget is the use of a rename's new name: made, or, for an
// exchange, moved away like the old one (each name receives the other's
// object).
func RenameTarget(exchange bool) Use {
	if exchange {
		return MovesFrom
	}
	return Makes
}

// Entry is admission's answer on a name before the name's directory is
// opened.
type Entry int

const (
	// EntryGo: open the name's directory and judge the name.
	EntryGo Entry = iota
	// EntryReadOnly: the mount is read-only (EROFS).
	EntryReadOnly
	// EntryAbsent: a hidden name (the mount's temps) does not exist on the
	// mount, so an op that needs it to exist gets ENOENT, as lookup does,
	// and no audit line: nothing is there to refuse.
	EntryAbsent
	// EntryHiddenName: making a hidden name is refused (EACCES, audited
	// PATH_ESCAPE): it would reach a name the mount says does not exist.
	EntryHiddenName
)

func (e Entry) String() string {
	switch e {
	case EntryGo:
		return "go"
	case EntryReadOnly:
		return "read-only"
	case EntryAbsent:
		return "absent"
	case EntryHiddenName:
		return "hidden name"
	}
	return "unknown entry"
}

// AdmitEntry is the first step of every operation that makes, removes or
// renames a name, use saying which: a read-only mount refuses, then a
// hidden name is absent or refused.
func AdmitEntry(readOnly, hidden bool, use Use) Entry {
	switch {
	case readOnly:
		return EntryReadOnly
	case !hidden:
		return EntryGo
	case use == Removes || use == MovesFrom:
		return EntryAbsent
	}
	return EntryHiddenName
}

// NameRule is which rule refuses a name an operation moves or makes.
type NameRule int

const (
	NameAllowed    NameRule = iota
	NameCredential          // CREDENTIAL_PATH_DENIED (NameDenied)
	NameProtected           // PROTECTED_PATH_DENIED: the name made is protected
)

func (r NameRule) String() string {
	switch r {
	case NameCredential:
		return "credential"
	case NameProtected:
		return "protected"
	}
	return "allowed"
}

// JudgeName judges name in the directory held by pfd, rel its workspace
// path, for an op that does use with it: when the op moves or makes a
// name other than a directory's, its credential check (NameDenied: a
// credential path, unless nothing is there yet and the op makes it, or
// what is there was made through the mount); then, when the op makes the
// name, its protect rule. A name removed is not judged.
func (g *Guard) JudgeName(rel string, pfd int, name string, use Use) NameRule {
	if (use == MovesFrom || use == Makes) && g.NameDenied(rel, pfd, name, use == Makes) {
		return NameCredential
	}
	if use == Makes && g.Protected(rel) {
		return NameProtected
	}
	return NameAllowed
}

// RenameNames is one rename's two names, each in the directory held by its
// fd, with its workspace path as the kernel has it now.
type RenameNames struct {
	OldDir, NewDir int
	Name, NewName  string
	OldRel, NewRel string
	Exchange       bool
}

// JudgeRename judges a rename's names at their places now, and says the
// path refused: for an exchange, both names against the protect rule first
// (each receives the other's object), then the old name as one moved
// away, then the new one as one made (moved away, for an exchange).
// What the move does beneath a directory or to a symlink's resolution is
// judged after (DirRename, LinkMoved).
func (g *Guard) JudgeRename(r RenameNames) (_ NameRule, rel string) {
	if r.Exchange {
		for _, rel := range []string{r.OldRel, r.NewRel} {
			if g.Protected(rel) {
				return NameProtected, rel
			}
		}
	}
	if rule := g.JudgeName(r.OldRel, r.OldDir, r.Name, MovesFrom); rule != NameAllowed {
		return rule, r.OldRel
	}
	if rule := g.JudgeName(r.NewRel, r.NewDir, r.NewName, RenameTarget(r.Exchange)); rule != NameAllowed {
		return rule, r.NewRel
	}
	return NameAllowed, ""
}

// RenameScans reports whether a rename's judgement is to start under the
// exclusive hold of the names (fusefs: nsMu): a directory moved is judged
// by a scan of what it holds (DirRename, LinkMoved), the old name's, and
// for an exchange the new name's too. A name that becomes a directory
// only after this look is met by the judgement's again.
func RenameScans(r RenameNames) bool {
	return isDirAt(r.OldDir, r.Name) || r.Exchange && isDirAt(r.NewDir, r.NewName)
}

// isDirAt reports whether name in the directory held by dir is a
// directory.
func isDirAt(dir int, name string) bool {
	var st unix.Stat_t
	return dirfd.Lstat(dir, name, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR
}

// SymlinkRule is which rule refuses a symlink being made.
type SymlinkRule int

const (
	SymlinkAllowed    SymlinkRule = iota
	SymlinkEscapes                // PATH_ESCAPE: the target leaves the root, or names a hidden name
	SymlinkCredential             // CREDENTIAL_PATH_DENIED: the target is a credential
	SymlinkPlants                 // PROTECTED_PATH_DENIED: the link's path is a protected directory prefix
)

func (r SymlinkRule) String() string {
	switch r {
	case SymlinkEscapes:
		return "escapes"
	case SymlinkCredential:
		return "credential"
	case SymlinkPlants:
		return "plants"
	}
	return "allowed"
}

// JudgeSymlink judges a symlink to target being made at rel, a name in the
// directory dir (workspace paths as the kernel has them now), beneath the
// root held by root, in one order: a target that breaks the rule
// (StaysInside), names a hidden name in any component (hidden: it would
// reach, by a path the kernel resolves in BACKING, a file the mount says
// does not exist) or resolves out of the root as the host would follow it
// (ResolvesInside) escapes; then a target that is a credential (matched is
// its path, LexicalTarget); then a link whose own path is a protected
// directory prefix plants: writes beneath it would land at its target,
// whose path the protect check sees, while a host's program reading the
// protected path follows the symlink to them. The name's own checks
// (JudgeName) come before.
func (g *Guard) JudgeSymlink(root int, dir, rel, target string, hidden func(name string) bool) (_ SymlinkRule, matched string) {
	if !StaysInside(PathDepth(dir), target) || TargetHidden(target, hidden) || !ResolvesInside(root, dir, target) {
		return SymlinkEscapes, ""
	}
	if t := LexicalTarget(dir, target); g.Denied(t) {
		return SymlinkCredential, t
	}
	if g.ProtectedPrefix(rel) {
		return SymlinkPlants, ""
	}
	return SymlinkAllowed, ""
}
