// Package journal is the store of the journal of changes (issue 30; the
// design is docs/JOURNAL.md): a directory on BACKING's filesystem holding
// the records of every change made through the mount, one JSON line each,
// in append-only segments, and the versions those changes replaced or
// removed, kept by hard link or rename in kept/<seq>, never copied.
//
// A change is two records: an intent, appended before the change is made
// (Begin, Remove), and an end (Change.Done, Change.Abort). With
// Options.Durable the intent and what it keeps are durable before Begin
// returns, so a change is never durable without its record; concurrent
// Begins share one fdatasync (a group commit). An end is appended without
// a sync of its own: the next sync, or recovery, settles it.
//
// Open takes the journal's LOCK (one writer at a time), cuts a torn last
// line and resolves every intent with no end by what its names lead to
// now, beneath BACKING's root fd, with no symlink followed: the change
// happened (done), did not (aborted: its kept link removed), or the names
// lead elsewhere (a change from outside since: done, for undo to report).
//
// Every system call on BACKING and on the journal's directory goes through
// fusefs/dirfd, on descriptors: the journal holds no path.
package journal

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/carry"
	"github.com/realm-dev/realm/fusefs/journal/jdir"
	"github.com/realm-dev/realm/fusefs/journal/keptlinks"
	"github.com/realm-dev/realm/fusefs/journal/logsync"
	"github.com/realm-dev/realm/fusefs/journal/makers"
	"github.com/realm-dev/realm/fusefs/journal/rootbind"
	"github.com/realm-dev/realm/fusefs/journal/seqtable"
	"github.com/realm-dev/realm/internal/lockorder"
)

const (
	// DirName is the default journal directory's name, beneath BACKING's
	// root: the mount never shows it.
	DirName = ".realm-journal"
	// DefaultDir, as Open's dir, asks for DirName beneath the root.
	DefaultDir = -1
	// DefaultSegmentSize is the size a segment is preallocated to and
	// rotated at.
	DefaultSegmentSize = 4 << 20
)

// The names inside the journal directory.
const (
	gitignoreName = jdir.Gitignore
	lockName      = jdir.Lock
	logName       = "log"
	keptName      = "kept"
	segmentSuffix = ".jsonl"
)

// ErrLocked: another process (or another Open) holds the journal's LOCK.
var ErrLocked = jdir.ErrLocked

// ErrClosed: the journal was closed.
var ErrClosed = errors.New("journal: closed")

// Options are the journal's settings.
type Options struct {
	// Durable (durability=full): an intent and the version it keeps are
	// durable before Begin returns.
	Durable bool
	// Ordered (with Durable): BACKING's filesystem makes its metadata
	// changes durable in the order they were made, each by a journal
	// commit written after a flush of the device (ext4 with a jbd2
	// journal: writeengine.OrdersRenamedData). Every intent is then
	// carried or written through, none flushed at Begin (package logsync).
	Ordered bool
	// SegmentSize is the size segments are preallocated to and rotated
	// at; 0 is DefaultSegmentSize.
	SegmentSize int64
	// Now is the clock records are stamped by; nil is time.Now.
	Now func() time.Time
	// Room takes n bytes from the room BACKING's filesystem leaves a
	// writer that is not root (a root daemon's fusefs/diskroom gauge):
	// refused, the change whose record needs them is refused (RoomError),
	// first on the first refusal of a burst. The journal asks it for what
	// its segments grow past their preallocation. nil: the kernel holds
	// the daemon to the room itself (it is not root), or nothing does.
	Room func(n int64) (refused, first bool)
}

// Recovery is what Open found and did.
type Recovery struct {
	Segments int   // segments read
	Records  int   // intents in them (past the pruned ones)
	CutBytes int64 // bytes of a torn last line cut from the last segment
	// Damaged: earlier segments with bytes after their last whole record
	// (left as they are; their records up to there are read).
	Damaged int
	// Intents with no end, resolved: Done (the names lead where the change
	// leaves them), Aborted (where it found them: its kept link removed),
	// Outside (elsewhere: a change from outside since; recorded done).
	Done, Aborted, Outside int
	// KeptRemoved: kept objects no record needs (a torn or aborted
	// intent's, an interrupted prune's); SegmentsRemoved: segments an
	// interrupted prune left.
	KeptRemoved, SegmentsRemoved int
	// Rebuilt: intents a crash lost from the log, rebuilt from their
	// described kept/ entries (described.go) or from LOCK's carry
	// (package carry), then resolved as above.
	Rebuilt int
}

// Journal is an open journal: its directory's descriptors, its LOCK, and
// the segment appended to.
type Journal struct {
	root     int            // BACKING's root (a dup)
	dir      int            // the journal directory (O_PATH)
	log      int            // log/ (O_PATH)
	kept     int            // kept/ (O_PATH)
	keptRead int            // kept/ opened for reading: its fsync
	flush    logsync.Policy // how intents are made durable, set at Open
	lock     *os.File       // LOCK, flocked
	opts     Options
	recovery Recovery

	mu lockorder.Mutex[lockorder.JournalMu]
	// synced is signalled (on mu) when a group commit ends and when a
	// rotation may go on.
	synced sync.Cond
	tail   // under mu

	pruned  atomic.Uint64
	pruning atomic.Bool
	// squeezed: Options.Room refused an intent since the last Prune,
	// which then drops a segment's worth more than its bounds ask.
	squeezed atomic.Bool
	// renewed: when Prune last weighed every segment again by lstat
	// (renewAfter), under pruning; zero until the first Prune.
	renewed time.Time
	// keptLinks: kept/'s links to objects by identity, written under mu.
	keptLinks keptlinks.Table
	// nameMax is the longest name kept/'s filesystem takes; describes:
	// a removal may go to a described entry (described.go).
	nameMax   int
	describes bool
	// described: the described kept/ entries' names by seq (described.go),
	// as paths beneath kept/; groups, the groups they go to.
	described describedNames
	groups    jdir.Groups
	// grown is signalled (never blocking) when the journal has grown
	// enough to apply the bounds again: Grown.
	grown chan struct{}
	// heldBytes, heldFiles: what the journal holds, counted as it keeps
	// (prune.go); bounds, those the last Prune applied (nil: none yet).
	heldBytes, heldFiles atomic.Int64
	bounds               atomic.Pointer[Bounds]
}

// growEvery is how many intents make the journal grown, between
// rotations.
const growEvery = 4096

// tail is the state of the journal's end, under Journal.mu.
type tail struct {
	next    uint64     // the next seq
	segs    []*segment // the segments, oldest first
	cur     *segment   // appended to (the last of segs); nil: none yet
	lastNum uint64     // the highest segment number made
	// written counts the bytes appended since Open, across segments;
	// durable, those made durable. keptGen counts the links made into
	// kept/; keptDurable, those made durable (kept/ fsynced after them).
	// completed, those written to the device and waited for (package
	// logsync: durable at the next flush).
	written, durable, completed uint64
	heldEnds
	keptGen, keptDurable uint64
	// fresh: the objects their makers may change with no sync of the
	// record (fresh.go), by identity; nil without Options.Durable, where
	// no record is synced.
	fresh     *makers.Table[ID]
	keptByseq seqtable.Table[ID] // keptLinks' seqs, to their identities
	// untallied: what kept objects added (bytes, files) whose intents
	// are held still, for the segment that notes them (countKept).
	untallied  map[uint64][2]int64
	tallying   bool // Open's recovery is over: segments made keep a tally
	sinceGrown int  // intents since grown was last signalled
	// carry: the intents held and not yet on the device, in LOCK's
	// attribute (package carry); nil but where Options.Ordered holds.
	carry   *carry.Carry
	syncing bool  // a group commit is under way, outside mu
	failed  error // a sync failed: nothing is promised since
	closed  bool
	encoded []byte // appendLineHeld's line, copied out before mu is let go: no allocation a line
}

// Open opens the journal of BACKING, whose root directory rootFd holds:
// dir, a directory of the journal on BACKING's filesystem, or DefaultDir
// for DirName beneath the root (made 0700 if absent). It lays the
// directory out (.gitignore, LOCK, log/, kept/), takes LOCK, reads the
// segments and recovers (Recovery says what it did). The caller keeps its
// descriptors; Close releases the journal's.
func Open(rootFd, dir int, opts Options) (*Journal, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// Recovery's records are of changes already made: never refused for
	// room (Options.Room), which a full disk must not make unmountable.
	room := opts.Room
	opts.Room = nil
	j := &Journal{root: -1, dir: -1, log: -1, kept: -1, keptRead: -1, opts: opts}
	j.synced.L = &j.mu
	j.grown = make(chan struct{}, 1)
	if opts.Durable {
		j.fresh = makers.New[ID](maxFresh, maxFreshOwners)
	}
	if err := j.open(rootFd, dir); err != nil {
		j.closeFds()
		return nil, err
	}
	covers := opts.Durable && logsync.FlushesCover(j.dir)
	j.flush = logsync.Policy{Covers: covers, Ordered: covers && opts.Ordered}
	nameMax, atomic := keptFilesystem(j.kept)
	j.nameMax, j.describes = nameMax, !opts.Durable || j.flush.Ordered || atomic
	if err := j.load(); err != nil {
		j.closeFds()
		return nil, err
	}
	// Recovery may have held ends whose timer (flushEnds) writes them
	// under mu while Open goes on: what that write reads is set under mu.
	j.mu.Lock()
	if j.flush.Ordered {
		j.carry = carry.New(int(j.lock.Fd()))
	}
	j.mu.Unlock()
	segs, _, err := j.weigh() // what it holds, counted from here on
	if err != nil {
		j.closeFds()
		return nil, err
	}
	j.measure(segs)
	j.mu.Lock()
	j.tallying = true
	j.opts.Room = room
	j.mu.Unlock()
	return j, nil
}

// open takes the descriptors and the lock.
func (j *Journal) open(rootFd, dir int) error {
	var err error
	if j.root, err = dirfd.Dup(rootFd); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if dir == DefaultDir {
		j.dir, err = jdir.OpenDefault(j.root, DirName)
	} else if j.dir, err = dirfd.Dup(dir); err == nil {
		err = jdir.SameFilesystem(j.root, j.dir)
	}
	if err != nil {
		return err
	}
	if err := jdir.Owned(j.dir, "its directory"); err != nil {
		return err
	}
	if dir == DefaultDir {
		err = jdir.Narrow(j.dir, DirName)
	} else {
		err = rootbind.Bind(j.dir, j.root, true)
	}
	if err != nil {
		return err
	}
	if err := jdir.WriteGitignore(j.dir); err != nil {
		return err
	}
	if j.lock, err = jdir.TakeLock(j.dir); err != nil {
		return err
	}
	if j.log, err = jdir.Subdir(j.dir, logName); err != nil {
		return err
	}
	if j.kept, err = jdir.Subdir(j.dir, keptName); err != nil {
		return err
	}
	j.groups.Init(j.kept, 0) // the lowest group: Open's listing (listKept)
	if j.keptRead, err = dirfd.ReopenDir(j.kept); err != nil {
		return fmt.Errorf("journal: opening kept/: %w", err)
	}
	return nil
}

// Recovery reports what Open found and did.
func (j *Journal) Recovery() Recovery { return j.recovery }

// Pruned is the last seq the bounds dropped (0: none).
func (j *Journal) Pruned() uint64 { return j.pruned.Load() }

// Grown is signalled when the journal has grown: as soon as what it holds
// (Held) passes the Bounds the last Prune applied, at a segment rotated,
// and every growEvery records appended. The daemon applies the bounds
// then (Prune), apart from the changes that made it grow. A signal no one
// took is not repeated until taken.
func (j *Journal) Grown() <-chan struct{} { return j.grown }

// signalGrown signals Grown without waiting.
func (j *Journal) signalGrown() {
	select {
	case j.grown <- struct{}{}:
	default:
	}
}

// Close appends nothing more: it waits for a group commit under way,
// makes what was appended durable (with Options.Durable), lets go of
// LOCK and closes the journal's descriptors. No other call may run
// during it (the daemon closes the journal once no request is left);
// those made after it answer ErrClosed.
func (j *Journal) Close() error {
	j.mu.Lock()
	for j.syncing {
		j.synced.Wait()
	}
	err := j.writeEndsLocked()
	j.stop()
	j.closed = true
	if j.cur != nil {
		if j.opts.Durable && j.failed == nil && j.durable < j.written {
			err = errors.Join(err, dirfd.Fdatasync(int(j.cur.f.Fd())))
		}
		if cerr := j.cur.f.Close(); err == nil {
			err = cerr
		}
		j.cur = nil
	}
	j.mu.Unlock()
	j.closeFds()
	if err != nil {
		return fmt.Errorf("journal: closing: %w", err)
	}
	return nil
}

// closeFds closes the descriptors Open took (LOCK's lets go of the lock).
func (j *Journal) closeFds() {
	j.groups.Close()
	if j.cur != nil {
		j.cur.f.Close()
		j.cur = nil
	}
	for _, fd := range []*int{&j.keptRead, &j.kept, &j.log, &j.dir, &j.root} {
		if *fd >= 0 {
			dirfd.Close(*fd)
			*fd = -1
		}
	}
	if j.lock != nil {
		j.lock.Close()
		j.lock = nil
	}
}
