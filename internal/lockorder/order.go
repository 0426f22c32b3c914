// Package lockorder is realm's lock order, written once, and the mutex
// types that carry it.
//
// Every mutex of the daemon's packages (fusefs and the packages beneath
// it, locks, procinfo) is a Mutex[C] or RWMutex[C], whose type argument C
// names its class in the table below. In an ordinary build they are sync.Mutex and sync.RWMutex and cost nothing more. Built
// with the tag lockdep (make unit-lockdep, and the e2e daemon under
// REALM_E2E_LOCKDEP=1) each goroutine's held locks are recorded, and
// taking a lock out of order, or holding one where none may be held (a
// kernel notification, a call into go-fuse's tree), is reported with the
// stacks of both acquisitions: the tests fail on it (RunTests).
//
// # The order
//
// A goroutine holding a lock takes only locks below it in this tree, and
// two locks of one class only where the class says in what order
// (LockOrdered). The tree is the table below, drawn:
//
//	locks.Entry
//	└─ locks.FileLock
//	   └─ FS.nsMu
//	      └─ FS.commitMu
//	         └─ guard.Guard.storeMu
//	            └─ guard.Guard.madeOpMu
//	               ├─ Node.mu
//	               │  ├─ inodes.Table.mu
//	               │  ├─ nodeopens.Set.mu
//	               │  └─ reclock.Heirs.mu
//	               ├─ handle.mu
//	               ├─ reclock.Set.mu
//	               ├─ Engine.tempsMu
//	               ├─ guard.IDs.mu
//	               ├─ guard.MadeSet.mu
//	               ├─ watch.Watcher.mu
//	               ├─ kernelnotify.Notifier.mu
//	               ├─ Auditor.mu
//	               ├─ fdbudget.Counts.mu
//	               ├─ dircache.Cache.mu
//	               ├─ requestnotes.Notes.mu
//	               ├─ Engine.movesMu
//	               ├─ readhold.Holds.mu
//	               ├─ locks.Table.mu
//	               ├─ procinfo.Resolver.fdMu
//	               ├─ procinfo.Resolver.mu
//	               ├─ procinfo.Resolver.tablesMu
//	               ├─ journal.Journal.mu
//	               │  └─ keptlinks.Table.pendingMu
//	               │     └─ keptlinks.Table.mu
//	               ├─ journal.describedNames.mu
//	               ├─ jdir.Groups.mu
//	               └─ unpublished.Table.mu
//
// Besides, no realm lock is held (AssertNoneHeld) while a notification
// goes to the kernel (fusefs/kernelnotify), while the mount-time scan is
// waited for (fusefs/guard AwaitScan), nor across a wait in the lock table
// (locks.Table.wait); nor, unchecked, while Flush waits out another
// thread's write (writeengine File.writeGoesOn). go-fuse's tree locks
// (Inode.Path, Parent, GetChild, NewInode) are taken under any class but
// those marked noGoFuse (GoFuse before each call); go-fuse calls into
// realm (OnForget too) holding none of them.
package lockorder

// Class is a lock class of the order: one of the types declared here, as
// the type argument of Mutex and RWMutex.
type Class interface{ class() *class }

// class is a row of the order.
type class struct {
	name string
	// under is the class next above in the tree: a lock of this class may
	// be taken while holding one of it or of a class above it. nil: the
	// root.
	under *class
	// ordered names the key by which several locks of the class are taken
	// together, in ascending order (LockOrdered); "" if never two at once.
	ordered string
	// noGoFuse: go-fuse's tree locks are not taken while it is held.
	noGoFuse bool
}

// The table: each lock, what it is held for, and the class it is taken
// under.
var (
	// One owner's write of one file (its pendingWrite) and the handles
	// sharing it. Two are held together only by CopyFileRange, in the
	// order their writes began (writeengine lockPair).
	entry = class{name: "locks.Entry", ordered: "pendingWrite.seq"}
	// One file's, shared by every owner's entry of it (locks.FileLock):
	// shared by an append in place from its look at the file (catchUp)
	// through its write(2); exclusive by a commit from its look at the
	// file through the move of the lock (Rekey), so that no other owner's
	// append lands in the file a commit is replacing.
	fileMu = class{name: "locks.FileLock", under: &entry}
	// Shared by every op that puts a name into a directory (create, mknod,
	// mkdir, symlink, link, a rename of a file, a commit's rename) from
	// its protect and credential checks through its system call; exclusive
	// by a rename that scans a directory (renameJudged), from the scan
	// through renameat2. Never held across a lock-table wait (a rename's
	// admit.Gate.HeldByOther comes before it) nor while guard.IDs.Has
	// waits for the mount-time scan (Link waits for the scan before it
	// takes nsMu).
	nsMu = class{name: "FS.nsMu", under: &fileMu}
	// Written by a commit's rename together with the move of the file's
	// lock to the new file (writeengine Write.replace, which takes it
	// through Host.LockCommit), read by the opens and stats that verify
	// a node's identity by name, by a write open's Acquire
	// (Node.openOnce) and a rename's lock look (FS.lockOf), so that no
	// one sees the new file unlocked. A commit holding it while
	// it waited in go-fuse's GetChild deadlocked with requests waiting
	// for it (issue 18): replace looks the node up before it takes it.
	commitMu = class{name: "FS.commitMu", under: &nsMu, noGoFuse: true}
	// Held by guard.Guard.OwnChange around the mount's own change of a file it
	// made at a credential path: its stat before, the system call, its
	// stat after.
	madeOpMu = class{name: "guard.Guard.madeOpMu", under: &storeMu}
	// Held by guard.Guard.SaveStore across its write of the store: the
	// made set and the credentials' identities read under it.
	storeMu = class{name: "guard.Guard.storeMu", under: &commitMu}

	// The rest are held for a map, a counter or a field or two.
	// Node.mu: a node's identity.
	nodeMu = class{name: "Node.mu", under: &madeOpMu}
	// inodes.Table.mu: the inode numbers across commits (rekeyed,
	// borrowed, holds, successors); a node is made under it (MadeUp).
	rekeyedMu = class{name: "inodes.Table.mu", under: &nodeMu}
	// nodeopens.Set.mu: the handles open on a node, by kind, and its
	// retired flag (fusefs's Node.opens); nothing is taken under it.
	nodeOpensMu = class{name: "nodeopens.Set.mu", under: &nodeMu, noGoFuse: true}
	// reclock.Heirs.mu: each node's lock set (its reclock.Place, made at
	// first use: Heirs.Of), the sets retired nodes hand on, and how many
	// nodes share each.
	heirsMu        = class{name: "reclock.Heirs.mu", under: &nodeMu}
	handleMu       = class{name: "handle.mu", under: &madeOpMu}
	lockFdsMu      = class{name: "reclock.Set.mu", under: &madeOpMu}
	tempsMu        = class{name: "Engine.tempsMu", under: &madeOpMu} // writeengine: the temps in use
	credInodesMu   = class{name: "guard.IDs.mu", under: &madeOpMu}   // Guard.Creds, ProtIDs, MadeDirs
	madeSetMu      = class{name: "guard.MadeSet.mu", under: &madeOpMu}
	watcherMu      = class{name: "watch.Watcher.mu", under: &madeOpMu}
	notifierMu     = class{name: "kernelnotify.Notifier.mu", under: &madeOpMu}
	auditorMu      = class{name: "Auditor.mu", under: &madeOpMu}
	fdCountsMu     = class{name: "fdbudget.Counts.mu", under: &madeOpMu}
	dirCacheMu     = class{name: "dircache.Cache.mu", under: &madeOpMu} // no system call under it
	requestNotesMu = class{name: "requestnotes.Notes.mu", under: &madeOpMu}
	movesMu        = class{name: "Engine.movesMu", under: &madeOpMu} // writeengine: marks of files a rename moves (BeginMoves)
	readHoldsMu    = class{name: "readhold.Holds.mu", under: &madeOpMu}
	tableMu        = class{name: "locks.Table.mu", under: &madeOpMu} // never an Entry's under it
	resolverFdMu   = class{name: "procinfo.Resolver.fdMu", under: &madeOpMu}
	resolverMu     = class{name: "procinfo.Resolver.mu", under: &madeOpMu}
	resolverTabMu  = class{name: "procinfo.Resolver.tablesMu", under: &madeOpMu}
	// journal.Journal.mu: the journal's tail (the next seq, the segment
	// written and where, what is durable) and the group commit's state;
	// held across a record's pwrite and a segment's rotation, never across
	// the group commit's fdatasync. Nothing is taken under it but a shard
	// of kept/'s links and their pending list.
	journalMu = class{name: "journal.Journal.mu", under: &madeOpMu, noGoFuse: true}
	// keptlinks.Table.pendingMu: the Adds to kept/'s links by identity
	// not in the table's shards yet (fusefs/journal/keptlinks), appended
	// under Journal.mu, put into the shards by a reader or at the list's
	// bound; nothing under it but a shard's lock.
	keptLinksPendingMu = class{name: "keptlinks.Table.pendingMu", under: &journalMu, noGoFuse: true}
	// keptlinks.Table.mu: a shard of kept/'s links by identity, written
	// under Journal.mu or pendingMu, read by a getattr; a map read or
	// written, nothing under it.
	keptLinksMu = class{name: "keptlinks.Table.mu", under: &keptLinksPendingMu, noGoFuse: true}
	// journal.describedNames.mu: the described kept/ entries' names by
	// seq; a map read or written, nothing else under it, and never taken
	// under Journal.mu.
	describedMu = class{name: "journal.describedNames.mu", under: &madeOpMu, noGoFuse: true}
	// jdir.Groups.mu: the groups of kept/ held open; nothing under it but
	// the close of a group's descriptor, and never taken under Journal.mu
	// or describedNames.mu.
	keptGroupsMu = class{name: "jdir.Groups.mu", under: &madeOpMu, noGoFuse: true}
	// unpublished.Table.mu: the names of created files not yet in BACKING
	// (fusefs/unpublished); two maps read or written, nothing under it.
	unpublishedMu = class{name: "unpublished.Table.mu", under: &madeOpMu, noGoFuse: true}
)

// known are breaches of the order found in the code and not fixed yet,
// each by the class held, what is taken (as a Violation's Taking says) and
// a function on the taking stack. They are counted (RunTests says how
// often) but fail nothing; take one out once fixed, and its return fails.
var known = []breach{}

type breach struct {
	held   *class
	taking string
	via    string
}

// The classes, one type each, named for the lock.
type (
	Entry              struct{}
	FileMu             struct{}
	NsMu               struct{}
	CommitMu           struct{}
	MadeOpMu           struct{}
	StoreMu            struct{}
	NodeMu             struct{}
	HandleMu           struct{}
	LockFdsMu          struct{}
	RekeyedMu          struct{}
	HeirsMu            struct{}
	NodeOpensMu        struct{}
	TempsMu            struct{}
	CredInodesMu       struct{}
	MadeSetMu          struct{}
	WatcherMu          struct{}
	NotifierMu         struct{}
	AuditorMu          struct{}
	FdCountsMu         struct{}
	DirCacheMu         struct{}
	RequestNotesMu     struct{}
	MovesMu            struct{}
	ReadHoldsMu        struct{}
	TableMu            struct{}
	ResolverFdMu       struct{}
	ResolverMu         struct{}
	ResolverTabMu      struct{}
	JournalMu          struct{}
	DescribedMu        struct{}
	KeptLinksMu        struct{}
	KeptLinksPendingMu struct{}
	KeptGroupsMu       struct{}
	UnpublishedMu      struct{}
)

func (Entry) class() *class              { return &entry }
func (FileMu) class() *class             { return &fileMu }
func (NsMu) class() *class               { return &nsMu }
func (CommitMu) class() *class           { return &commitMu }
func (MadeOpMu) class() *class           { return &madeOpMu }
func (StoreMu) class() *class            { return &storeMu }
func (NodeMu) class() *class             { return &nodeMu }
func (HandleMu) class() *class           { return &handleMu }
func (LockFdsMu) class() *class          { return &lockFdsMu }
func (RekeyedMu) class() *class          { return &rekeyedMu }
func (HeirsMu) class() *class            { return &heirsMu }
func (NodeOpensMu) class() *class        { return &nodeOpensMu }
func (TempsMu) class() *class            { return &tempsMu }
func (CredInodesMu) class() *class       { return &credInodesMu }
func (MadeSetMu) class() *class          { return &madeSetMu }
func (WatcherMu) class() *class          { return &watcherMu }
func (NotifierMu) class() *class         { return &notifierMu }
func (AuditorMu) class() *class          { return &auditorMu }
func (FdCountsMu) class() *class         { return &fdCountsMu }
func (DirCacheMu) class() *class         { return &dirCacheMu }
func (RequestNotesMu) class() *class     { return &requestNotesMu }
func (MovesMu) class() *class            { return &movesMu }
func (ReadHoldsMu) class() *class        { return &readHoldsMu }
func (TableMu) class() *class            { return &tableMu }
func (ResolverFdMu) class() *class       { return &resolverFdMu }
func (ResolverMu) class() *class         { return &resolverMu }
func (ResolverTabMu) class() *class      { return &resolverTabMu }
func (JournalMu) class() *class          { return &journalMu }
func (DescribedMu) class() *class        { return &describedMu }
func (KeptLinksMu) class() *class        { return &keptLinksMu }
func (KeptLinksPendingMu) class() *class { return &keptLinksPendingMu }
func (KeptGroupsMu) class() *class       { return &keptGroupsMu }
func (UnpublishedMu) class() *class      { return &unpublishedMu }
