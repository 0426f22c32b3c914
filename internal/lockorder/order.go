// Package lockorder is realm's lock order, written once, and the mutex
// types that carry it.
//
// Every mutex of fusefs, locks and procinfo is a Mutex[C] or RWMutex[C],
// whose type argument C names its class in the table below. In an ordinary
// build they are sync.Mutex and sync.RWMutex and cost nothing more. Built
// with the tag lockdep (make unit-lockdep, and the e2e daemon under
// REALM_E2E_LOCKDEP=1) each goroutine's held locks are recorded, and
// taking a lock out of order, or holding one where none may be held (a
// kernel notification, a call into go-fuse's tree), is reported with the
// stacks of both acquisitions: the tests fail on it (RunTests).
//
// # The order
//
// A goroutine holding a lock takes only locks of a greater rank; leaves take
// none. Outermost first:
//
//	locks.Entry                 10  one owner's write of one file (its pendingWrite)
//	│                               and the handles sharing it; two at once only
//	│                               in pendingWrite.seq order (fusefs lockPair)
//	└─ FS.nsMu                  20  a name's judgement and the call that puts it in place
//	   └─ FS.commitMu           30  a commit's rename and the lock's move; never
//	      │                         held into go-fuse's tree (issue 18)
//	      └─ FS.madeOpMu        40  the mount's own change of a made credential-path file
//	         └─ leaves         100  held only for a map or a counter: below
//
// Leaves: Node.mu, handle.mu, lockFds.mu, FS.rekeyedMu, FS.tempsMu,
// credInodes.mu, madeSet.mu, watcher.mu, notifier.mu, Auditor.mu,
// fdCounts.mu, dirCache.mu, umaskTable.mu, locks.Table.mu,
// procinfo.Resolver.fdMu, procinfo.Resolver.mu, procinfo.Resolver.tablesMu.
//
// Besides: no realm lock is held while a notification goes to the kernel
// (AssertNoneHeld in fusefs/notify.go), while credInodes.has waits for the
// mount-time scan, nor while Flush waits out another thread's write; nsMu
// is not held across a lock-table wait. go-fuse's tree locks (Inode.Path,
// Parent, GetChild, NewInode, Children) are taken under any class but
// those marked noGoFuse (GoFuse); go-fuse calls the node (OnForget) holding
// none of realm's.
package lockorder

// Class is a lock class of the order: one of the types declared here, as
// the type argument of Mutex and RWMutex.
type Class interface{ class() *class }

// class is a row of the order.
type class struct {
	name string
	rank int
	// ordered names the key by which several locks of the class are taken
	// together, in ascending order (LockOrdered); "" if never two at once.
	ordered string
	// noGoFuse: go-fuse's tree locks are not taken while it is held.
	noGoFuse bool
}

const leaf = 100

// The table. Ranks are spaced so that a lock can be placed between two.
var (
	entry    = class{name: "locks.Entry", rank: 10, ordered: "pendingWrite.seq"}
	nsMu     = class{name: "FS.nsMu", rank: 20}
	commitMu = class{name: "FS.commitMu", rank: 30, noGoFuse: true}
	madeOpMu = class{name: "FS.madeOpMu", rank: 40}

	nodeMu        = class{name: "Node.mu", rank: leaf}
	handleMu      = class{name: "handle.mu", rank: leaf}
	lockFdsMu     = class{name: "lockFds.mu", rank: leaf}
	rekeyedMu     = class{name: "FS.rekeyedMu", rank: leaf}
	tempsMu       = class{name: "FS.tempsMu", rank: leaf}
	credInodesMu  = class{name: "credInodes.mu", rank: leaf}
	madeSetMu     = class{name: "madeSet.mu", rank: leaf}
	watcherMu     = class{name: "watcher.mu", rank: leaf}
	notifierMu    = class{name: "notifier.mu", rank: leaf}
	auditorMu     = class{name: "Auditor.mu", rank: leaf}
	fdCountsMu    = class{name: "fdCounts.mu", rank: leaf}
	dirCacheMu    = class{name: "dirCache.mu", rank: leaf}
	umaskTableMu  = class{name: "umaskTable.mu", rank: leaf}
	tableMu       = class{name: "locks.Table.mu", rank: leaf}
	resolverFdMu  = class{name: "procinfo.Resolver.fdMu", rank: leaf}
	resolverMu    = class{name: "procinfo.Resolver.mu", rank: leaf}
	resolverTabMu = class{name: "procinfo.Resolver.tablesMu", rank: leaf}
)

// The classes, one type each, named for the lock.
type (
	Entry         struct{}
	NsMu          struct{}
	CommitMu      struct{}
	MadeOpMu      struct{}
	NodeMu        struct{}
	HandleMu      struct{}
	LockFdsMu     struct{}
	RekeyedMu     struct{}
	TempsMu       struct{}
	CredInodesMu  struct{}
	MadeSetMu     struct{}
	WatcherMu     struct{}
	NotifierMu    struct{}
	AuditorMu     struct{}
	FdCountsMu    struct{}
	DirCacheMu    struct{}
	UmaskTableMu  struct{}
	TableMu       struct{}
	ResolverFdMu  struct{}
	ResolverMu    struct{}
	ResolverTabMu struct{}
)

func (Entry) class() *class         { return &entry }
func (NsMu) class() *class          { return &nsMu }
func (CommitMu) class() *class      { return &commitMu }
func (MadeOpMu) class() *class      { return &madeOpMu }
func (NodeMu) class() *class        { return &nodeMu }
func (HandleMu) class() *class      { return &handleMu }
func (LockFdsMu) class() *class     { return &lockFdsMu }
func (RekeyedMu) class() *class     { return &rekeyedMu }
func (TempsMu) class() *class       { return &tempsMu }
func (CredInodesMu) class() *class  { return &credInodesMu }
func (MadeSetMu) class() *class     { return &madeSetMu }
func (WatcherMu) class() *class     { return &watcherMu }
func (NotifierMu) class() *class    { return &notifierMu }
func (AuditorMu) class() *class     { return &auditorMu }
func (FdCountsMu) class() *class    { return &fdCountsMu }
func (DirCacheMu) class() *class    { return &dirCacheMu }
func (UmaskTableMu) class() *class  { return &umaskTableMu }
func (TableMu) class() *class       { return &tableMu }
func (ResolverFdMu) class() *class  { return &resolverFdMu }
func (ResolverMu) class() *class    { return &resolverMu }
func (ResolverTabMu) class() *class { return &resolverTabMu }
