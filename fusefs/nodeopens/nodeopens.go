// Package nodeopens keeps the handles open on one node of the mount, by
// kind, and decides what a new one is admitted as: a plain reader passing
// through to the backing file, reading through the kernel's page cache or
// reading direct; an in-place handle of a coordinated file; a handle of an
// owner's pending write; or none, and the node is retired (Set.Retire).
//
// It is a package of its own because its rules are the kernel's, not
// go-fuse's: it makes no system call and imports nothing of go-fuse, and
// fusefs's Node holds one Set and asks it at each open and release.
//
// # Views of a file being written
//
// While an owner writes a file, two versions of it exist: the file as
// committed, which every other owner reads, and the owner's temp. The
// kernel keeps one size per inode, and it acts on it: a read through the
// page cache stops there, an O_APPEND write starts there, lseek(SEEK_END)
// and mmap use it. Whatever the daemon last answered (a lookup, any
// process's stat) becomes that size. So:
//
//   - A node serves the kernel one version through its cache. A write
//     open on a node whose readers pass through or read through the page
//     cache retires it (Set.AdmitShared refuses; fusefs's Node.retire): the
//     writer meets the file on a new node, the readers keep the version
//     they opened. Plain readers that open while the node has a pending
//     write's handles (Set.InFlux) read direct: no read of theirs stops at
//     the writer's size.
//   - Attributes are the caller's owner's view: the temp's for the owner
//     writing, the committed file's for everyone else, whichever handle
//     go-fuse lends a stat by path. While the node has write handles they
//     are not cached (Set.AttrValid), so the kernel asks again, with the
//     asking process, before each stat and each lseek(SEEK_END); but for
//     a CREATE's answer, which is every owner's view (Set.CreatedAttrValid).
//   - An O_APPEND write is placed at the end of the temp by the daemon
//     (fusefs's writeHandle.Write, for a handle opened O_APPEND), not at
//     the size the kernel last heard of.
//   - A writer and a reader are admitted to a node in one step each
//     (Set.AdmitShared, Set.AdmitReader, under the Set's lock): a
//     passthrough reader admitted beside a writer would make the kernel
//     fail the writer's open after the daemon made its handle (and such a
//     handle's O_TRUNC must then not be committed: fusefs's
//     writeHandle.Release).
//   - A retire costs an ESTALE, which the kernel retries once. A file
//     written now keeps new readers off passthrough for RetireHold, so that
//     the next write open need not retire again; a node a lookup made for
//     the file a commit was replacing catches up with the commit instead of
//     answering ESTALE (fusefs's Node.catchUp, by generation: inode numbers
//     are reused at once); readers that all read direct share a node across
//     versions (Set.AdmitReader).
//   - A node whose name a rename replaced answers open and stat with
//     ESTALE, not ENOENT: the kernel looks the name up again, and a reader
//     racing an editor's save by rename never misses the file.
//
// Under saves by rename every few milliseconds an open can still meet two
// stale nodes in a row and fail with ESTALE: the kernel retries once.
// What is left: a mapping faults against the size the kernel last heard
// of. A shared mmap of a file being written may meet the committed size
// (another owner's stat), and a reader's mmap of a file that a commit
// shrinks gets SIGBUS past the new end, as natively when a file is
// truncated under a mapping.
//
// # States and transitions
//
// A Set is in one State, by how the kernel serves its node's reads, and
// retired or not. Its events are the admissions (AdmitReader, AdmitInPlace,
// AdmitShared), the releases (ReaderGone, InPlaceGone, SharedGone), Retire
// and HoldOff. Readers here are plain readers and in-place handles; a
// pending write's handles are shared handles.
//
//	state           event                                   answer        next state
//	Idle            reader, no hold, mount passes through   Passthrough   PassingThrough
//	Idle            reader, otherwise                       Cached/Direct Caching/Uncached
//	Idle            shared handle                           admitted      Uncached
//	PassingThrough  reader of the same version              Passthrough   PassingThrough
//	PassingThrough  reader of another version               Refused       (retire)
//	PassingThrough  shared handle for the kernel            Refused       (retire)
//	Caching         reader of the same version              Cached/Direct Caching
//	Caching         reader of another version               Refused       (retire)
//	Caching         shared handle for the kernel            Refused       (retire)
//	Uncached        reader of any version                   Direct        Uncached
//	Uncached        reader of the same version, no reason   Cached        Caching
//	                to read direct (see AdmitReader)
//	any             shared handle the kernel never sees     admitted      as it was
//	any             the last handle released                              Idle
//	any, retired    any admission for the kernel            Refused       as it was
//
// An in-place handle joins only in-place handles of its version and its
// way of serving (AdmitInPlace). Retired is for good: the node's handles
// stay open and close, but it takes no new handle the kernel would see.
package nodeopens

import (
	"time"

	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// RetireHold is how long the new node of a retired one keeps its readers
// from passing through: long enough for the open that retired it to come
// back through a fresh lookup, not so long that readers miss passthrough.
// A pending write's handle holds its own node's readers off as long
// (Set.AdmitShared).
const RetireHold = time.Second

// Mode is what a handle is admitted as: how the kernel serves its reads.
type Mode int8

const (
	// Refused: the handle is not admitted; the node is to be retired.
	Refused Mode = iota
	// Passthrough: the kernel reads the backing file without the daemon.
	Passthrough
	// Cached: the kernel reads through its page cache, filled by the daemon.
	Cached
	// Direct: every read goes to the daemon (FOPEN_DIRECT_IO).
	Direct
)

// String names m.
func (m Mode) String() string {
	switch m {
	case Refused:
		return "refused"
	case Passthrough:
		return "passthrough"
	case Cached:
		return "cached"
	case Direct:
		return "direct"
	}
	return "mode?"
}

// State is how the kernel serves the reads of a Set's node now.
type State int8

const (
	// Idle: no handle is open.
	Idle State = iota
	// PassingThrough: readers are open, and every one of them passes
	// through to one backing file, of one version.
	PassingThrough
	// Caching: some readers read through the page cache, all of one
	// version.
	Caching
	// Uncached: handles are open, and none passes through or reads through
	// the page cache: direct readers, of any versions, and shared handles.
	Uncached
)

// String names s.
func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case PassingThrough:
		return "passing through"
	case Caching:
		return "caching"
	case Uncached:
		return "uncached"
	}
	return "state?"
}

// Counts are the handles open on a Set's node, by kind.
type Counts struct {
	Readers int // plain readers and in-place handles
	InPlace int // of them, in-place handles of a coordinated file
	Cached  int // of them, those reading through the page cache
	Shared  int // handles of an owner's pending write
	// Uncached are the handles that do not pass through: while there are
	// any, a new reader does not pass through unless it joins readers that
	// do.
	Uncached int
}

// A Set is the handles open on one node, by kind, and the node's retired
// flag. Its zero value is an idle set, not retired, with no hold. Its
// methods are safe for concurrent use: each decision and its count are
// one step under the Set's own lock, which is taken under nothing but
// the locks above fusefs's Node.mu and under which nothing is taken
// (internal/lockorder). A Set must not be copied after first use.
type Set struct {
	mu lockorder.Mutex[lockorder.NodeOpensMu]
	// readers all read the version key of the file, by passthrough if pt
	// (AdmitReader); cached of them read through the kernel's page cache,
	// which a write open must not share; inPlace of them are in-place
	// handles.
	readers, inPlace, cached int
	key                      locks.Key
	pt                       bool
	// shared counts the handles of an owner's pending write. While there
	// are any, the kernel's one size for the inode is not the committed
	// file's for everyone: new plain readers read direct, and attributes
	// are not cached.
	shared  int
	retired bool
	// hold keeps the node's readers from passing through until then:
	// while the writer whose open retired the node's predecessor comes
	// back for it, and after a pending write's handle was admitted.
	hold time.Time
}

// uncached is how many handles do not pass through: the shared handles,
// and the readers unless they pass through (all of them alike). The
// caller holds s.mu.
func (s *Set) uncached() int {
	if s.pt {
		return s.shared
	}
	return s.shared + s.readers
}

// HoldOff keeps the node's readers from passing through until then (the
// hold of the node's file when the node was made: another node of it was
// retired just before). A later hold already set stays.
func (s *Set) HoldOff(until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if until.After(s.hold) {
		s.hold = until
	}
}

// AdmitReader counts a plain reader of the file version key, at time now,
// and says how the kernel is to serve it. The kernel serves an inode's
// read handles through one backing file while any of them passes through,
// and through one page cache otherwise, so all of the node's plain readers
// that pass through or read through the cache must read the same version
// of the file: a reader of another version (the file was rewritten since
// they opened it) is Refused, and the node is to be retired. Readers that
// all read direct may each read their own version. A retired set admits
// no reader.
//
// A reader passes through (mayPass: the mount passes through) only while
// no other kind of handle is open on the node (a direct-I/O handle that
// was mmapped may hold pages in the cache, and the kernel then refuses
// passthrough opens) and neither the node's hold (HoldOff, AdmitShared)
// nor fileHold, its file's (a node made for the file just before another
// of its nodes was retired), lasts; otherwise it reads direct, through the
// daemon, or through the page cache.
func (s *Set) AdmitReader(key locks.Key, mayPass bool, now, fileHold time.Time) Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired {
		return Refused
	}
	held := now.Before(s.hold) || now.Before(fileHold)
	pt := mayPass && s.uncached() == 0 && !held
	mixed := false
	if s.readers > 0 {
		if s.key != key {
			if s.pt || s.cached > 0 {
				return Refused
			}
			// Every reader here reads direct: each handle reads its own
			// version, and none is cached, so the node need not go (a
			// retire is an ESTALE the kernel retries only once).
			mixed = true
		}
		pt = s.pt // the kernel wants every open of the inode alike
	}
	s.readers++
	s.key, s.pt = key, pt
	if pt {
		return Passthrough
	}
	// Read direct, past the kernel's page cache, where the mount passes
	// through (the cache would hold what this reader read while others
	// pass through), and while the node's size is an owner's pending
	// write's: a read from the cache stops at that size.
	if mayPass || s.shared > 0 || held || mixed {
		return Direct
	}
	s.cached++
	return Cached
}

// ReaderGone uncounts a plain reader admitted as m.
func (s *Set) ReaderGone(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers--
	if m == Cached {
		s.cached--
	}
}

// AdmitInPlace counts an in-place handle of the file version key, passing
// through if pt, unless the set is retired or has handles of an owner's
// pending write, plain readers (a passthrough reader's read-only backing
// file would be the new handle's too), or in-place handles of another
// version or the other way of serving (the kernel refuses to mix
// passthrough and cached opens of one inode). keep: other in-place handles
// are open, and the kernel's cache of the node is theirs, filled through
// this file.
func (s *Set) AdmitInPlace(key locks.Key, pt bool) (keep, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired || s.shared > 0 || s.readers > s.inPlace ||
		s.readers > 0 && (s.pt != pt || s.key != key) {
		return false, false
	}
	keep = s.inPlace > 0
	s.readers++
	s.inPlace++
	s.key, s.pt = key, pt
	if !pt {
		s.cached++
	}
	return keep, true
}

// InPlaceGone uncounts an in-place handle admitted passing through if pt.
func (s *Set) InPlaceGone(pt bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers--
	s.inPlace--
	if !pt {
		s.cached--
	}
}

// AdmitShared counts a handle of a pending write at time now, unless the
// node has read handles that pass through or read through the page
// cache, which it must not join (passing through, the kernel refuses any
// open of the inode that does not pass through to the same backing file),
// or the set is retired. The check and the count are one step, as
// AdmitReader's are: a reader admitted between them could pass through
// beside the writer, and the kernel would fail the writer's open after the
// daemon had made its handle. Handles the kernel never sees (forKernel
// false) are always counted.
func (s *Set) AdmitShared(forKernel bool, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if forKernel && (s.retired || s.readers > 0 && (s.pt || s.cached > 0)) {
		return false
	}
	s.shared++
	// A file written now is likely written again soon: readers that open
	// in the next moment read direct, so that the next write open need
	// not retire the node (an ESTALE the kernel retries only once).
	if until := now.Add(RetireHold); until.After(s.hold) {
		s.hold = until
	}
	return true
}

// SharedGone uncounts a handle of a pending write.
func (s *Set) SharedGone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shared--
}

// Retire marks the set retired: it admits no new handle for the kernel,
// which would serve it through what the open handles hold (a passthrough
// backing file, or a page cache, of an older version) instead of through
// the file as it is now. The open handles stay, and are released as ever.
func (s *Set) Retire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retired = true
}

// Retired reports whether the set takes no new handles for the kernel.
func (s *Set) Retired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retired
}

// InFlux reports whether handles of an owner's pending write are open.
func (s *Set) InFlux() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shared > 0
}

// OwnerViewFits reports whether a stat answered for the node may give an
// owner's view of the file, another size than the committed file's: the
// node is in flux (its readers read direct), or none of its handles reads
// by the size the kernel keeps for the inode (none through the page
// cache, none passing through), so no reader's reads are cut short.
func (s *Set) OwnerViewFits() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shared > 0 || s.cached == 0 && (s.readers == 0 || !s.pt)
}

// AttrValid is how long the kernel may keep the node's attributes, of the
// mount's timeout: not at all while the node is in flux, nor once it is
// retired (its readers hold a file that appends in place may grow: tail
// -f stats its descriptor, which the kernel answers from this cache). The
// caller also answers 0 while any owner holds the file's lock through
// another node: its appends in place grow the file under every node that
// stands for it, and only the writer's node hears of them.
func (s *Set) AttrValid(timeout time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shared > 0 || s.retired {
		return 0
	}
	return timeout
}

// CreatedAttrValid is how long the kernel may keep the attributes of the
// file that a CREATE just made, of the mount's timeout. The node is in
// flux from here, but every owner's view of the file is the same, empty,
// until its creator changes it, and each change reaches the kernel's
// cache: a write invalidates the size and times it keeps (as after any
// write), a truncate, chmod or utimens answers with attributes not cached
// (AttrValid). So the entry's may be kept, which spares the GETATTR of the
// fstat that follows open(2) in Go's os.OpenFile, cp and tar; not once
// the node is retired. A created file never has a set-ID bit that a write
// would clear (guard.HostFileMode).
func (s *Set) CreatedAttrValid(timeout time.Duration) time.Duration {
	if s.Retired() {
		return 0
	}
	return timeout
}

// State is how the kernel serves the node's reads now.
func (s *Set) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.readers > 0 && s.pt:
		return PassingThrough
	case s.cached > 0:
		return Caching
	case s.readers > 0 || s.shared > 0:
		return Uncached
	}
	return Idle
}

// Counts returns the handles open now, by kind.
func (s *Set) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Counts{Readers: s.readers, InPlace: s.inPlace, Cached: s.cached,
		Shared: s.shared, Uncached: s.uncached()}
}
