package journal

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/jdir"
	"github.com/realm-dev/realm/fusefs/journal/keptname"
	"github.com/realm-dev/realm/fusefs/journal/rootbind"
)

// ErrNoJournal: the directory OpenReader was given holds no journal (or
// BACKING has no DirName).
var ErrNoJournal = errors.New("no journal")

// Reader reads a journal without being its writer: it takes no LOCK,
// writes nothing and recovers nothing, so that `realmfs journal list` and
// `diff` can read the journal of a mounted BACKING while its daemon
// appends. It reads the segments as they are: a torn or preallocated tail
// is their end, and an intent with no end yet (a change in flight, or one
// a crash left for the next Open's recovery) comes back with End "", as
// do those LOCK carries past them (package carry: a killed daemon's).
type Reader struct {
	dir, log, kept int // O_PATH; kept is -1 where kept/ is absent
	// described: kept/'s described entries by seq (described.go), read
	// at the first OpenKept that needs one.
	described map[uint64]string
}

// OpenReader opens for reading the journal of BACKING, whose root
// directory rootFd holds: dir, the journal's directory, or DefaultDir for
// DirName beneath the root. A directory with no log/ (or no DirName) is
// ErrNoJournal. The caller keeps its descriptors; Close releases the
// Reader's.
func OpenReader(rootFd, dir int) (*Reader, error) {
	r := &Reader{dir: -1, log: -1, kept: -1}
	var err error
	if dir == DefaultDir {
		r.dir, err = dirfd.OpenDir(rootFd, DirName)
	} else if r.dir, err = dirfd.Dup(dir); err == nil {
		if err := rootbind.Bind(r.dir, rootFd, false); err != nil {
			r.Close()
			return nil, err
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("journal: %w (%s: %w)", ErrNoJournal, DirName, err)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: opening its directory: %w", err)
	}
	if r.log, err = dirfd.OpenDir(r.dir, logName); err != nil {
		r.Close()
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("journal: %w (%s/: %w)", ErrNoJournal, logName, err)
		}
		return nil, fmt.Errorf("journal: opening %s/: %w", logName, err)
	}
	if r.kept, err = dirfd.OpenDir(r.dir, keptName); err != nil && !errors.Is(err, unix.ENOENT) {
		r.Close()
		return nil, fmt.Errorf("journal: opening %s/: %w", keptName, err)
	}
	for _, d := range []struct {
		fd   int
		what string
	}{{r.dir, "its directory"}, {r.log, logName + "/"}, {r.kept, keptName + "/"}} {
		if d.fd < 0 {
			continue
		}
		if err := ownedOnly(d.fd, d.what); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// ErrNotOwned is wrapped by OpenReader's error for a journal the caller's
// effective uid does not own alone.
var ErrNotOwned = errors.New("not the reader's own journal")

// ownedOnly refuses a directory of the journal that the reader's user
// does not own, or that its group or others may write: records anyone
// else could have written, in a BACKING they may write, are not the
// mount's history (`journal list`, `diff`), and `journal undo`, which
// reads them first, would put back what they say (modes, set-id bits,
// owners), as root where it runs as root. Open refuses another user's
// journal too (jdir.Owned); the reader changes nothing, so it refuses a
// writable one rather than narrowing it.
func ownedOnly(fd int, what string) error {
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return fmt.Errorf("journal: %s: %w", what, err)
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return fmt.Errorf("journal: %s is owned by uid %d, not by this user (uid %d): run as the daemon's user: %w", what, st.Uid, euid, ErrNotOwned)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("journal: %s is writable by its group or others (mode %04o), so its records may not be its daemon's: %w", what, st.Mode&0o7777, ErrNotOwned)
	}
	return nil
}

// Close releases the Reader's descriptors.
func (r *Reader) Close() error {
	for _, fd := range []*int{&r.kept, &r.log, &r.dir} {
		if *fd >= 0 {
			dirfd.Close(*fd)
			*fd = -1
		}
	}
	return nil
}

// Pruned is the last seq the bounds dropped (0: none), as the pruned
// file says now.
func (r *Reader) Pruned() (uint64, error) { return jdir.ReadPruned(r.dir) }

// Records returns the changes f selects, oldest first (by seq), each an
// intent with its End (and the After its end said) filled in: End "" is
// a change with no end yet. It reads every segment of log/ as it is now:
// a segment a concurrent prune removes is left out, one made after the
// listing is not read.
func (r *Reader) Records(f Filter) ([]Record, error) {
	pruned, err := r.Pruned()
	if err != nil {
		return nil, err
	}
	nums, err := listSegments(r.log)
	if err != nil {
		return nil, err
	}
	var m merger
	for _, num := range nums {
		data, err := readSegment(r.log, num, -1)
		if errors.Is(err, unix.ENOENT) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("journal: reading log/%s: %w", segmentName(num), err)
		}
		m.add(parseSegment(data).lines, &f)
	}
	// The intents a killed daemon held, carried in LOCK's attribute,
	// past what the log has: as the next Open will append them.
	if fd, err := dirfd.Open(r.dir, lockName, unix.O_RDONLY, 0); err == nil {
		lost, err := carriedPast(fd, m.max)
		dirfd.Close(fd)
		if err != nil {
			return nil, err
		}
		m.add(lost, &f)
	}
	return m.result(pruned), nil
}

// merger joins intents to their ends, in the order segments are read.
type merger struct {
	out []Record
	at  map[uint64]int
	max uint64 // the highest seq of the lines added
}

// add takes the lines of one segment: the intents f selects, and the
// ends of those taken.
func (m *merger) add(lines []line, f *Filter) {
	if m.at == nil {
		m.at = map[uint64]int{}
	}
	for i := range lines {
		l := &lines[i]
		m.max = max(m.max, l.Seq)
		if l.Op != "" {
			if f.matches(l) {
				m.at[l.Seq] = len(m.out)
				m.out = append(m.out, l.record())
			}
		} else if i, ok := m.at[l.Seq]; ok {
			m.out[i].ended(l)
		}
	}
}

// result is the records taken, those at or below pruned left out.
func (m *merger) result(pruned uint64) []Record {
	out := m.out
	for len(out) > 0 && out[0].Seq <= pruned {
		out = out[1:]
	}
	return out
}

// OpenKept opens kept/<seq>, the version change seq replaced or removed,
// as an O_PATH fd (the caller's to close; dirfd.Reopen reads a file's).
// A change that kept nothing, or whose kept version was pruned, is
// ENOENT.
func (r *Reader) OpenKept(seq uint64) (int, error) {
	if r.kept < 0 {
		return -1, fmt.Errorf("journal: %s/: %w", keptName, unix.ENOENT)
	}
	fd, err := dirfd.OpenPath(r.kept, keptEntry(seq))
	if !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	if r.described == nil { // once: a listing of kept/ for its described names
		m, lerr := describedIn(r.kept)
		if lerr != nil {
			return -1, lerr
		}
		r.described = m
	}
	rel, ok := r.described[seq]
	if !ok {
		return -1, err
	}
	return jdir.OpenKept(r.kept, rel)
}

// describedIn maps the described entries of kept (kept/) and its groups
// by seq to their paths beneath kept/: for a Reader, which notes none.
func describedIn(kept int) (map[uint64]string, error) {
	ents, _, done, err := jdir.ListKept(kept, keptname.Seq)
	if err != nil {
		return nil, err
	}
	done()
	m := map[uint64]string{}
	for _, de := range ents {
		if e, ok := keptname.Parse(de.Name); ok {
			m[e.Seq] = de.Rel
		}
	}
	return m, nil
}

// Filter selects records; each field set narrows the selection.
type Filter struct {
	Owner string    // the owner's, as the records write it
	Since time.Time // recorded at or after
	// From, To: the seqs, inclusive (0: unbounded).
	From, To uint64
}

// matches reports whether intent l passes f.
func (f *Filter) matches(l *line) bool {
	return (f.Owner == "" || l.Owner == f.Owner) &&
		(f.Since.IsZero() || !l.Time.Before(f.Since)) &&
		(f.From == 0 || l.Seq >= f.From) &&
		(f.To == 0 || l.Seq <= f.To)
}

// part is a segment as Records reads it: its number, how much of it
// (-1: all), the highest seq it holds.
type part struct {
	num   uint64
	limit int64
	max   uint64
}

// Records returns the changes f selects, oldest first (by seq), each an
// intent with its End (and the After its end said) filled in: End ""
// is a change in flight. It reads the segments as they are while Begin
// and End go on; what a concurrent Prune drops is left out.
func (j *Journal) Records(f Filter) ([]Record, error) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, ErrClosed
	}
	if err := j.writeEndsLocked(); err != nil {
		j.mu.Unlock()
		return nil, err
	}
	parts := make([]part, 0, len(j.segs))
	for _, s := range j.segs {
		p := part{num: s.num, limit: -1, max: s.max}
		if s == j.cur {
			p.limit = s.off
		}
		parts = append(parts, p)
	}
	j.mu.Unlock()
	var out []Record
	at := map[uint64]int{}
	for _, p := range parts {
		if f.From != 0 && p.max < f.From {
			continue // ends are never before their intent
		}
		data, err := readSegment(j.log, p.num, p.limit)
		if errors.Is(err, unix.ENOENT) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("journal: reading log/%s: %w", segmentName(p.num), err)
		}
		for _, l := range parseSegment(data).lines {
			if l.Op != "" {
				if f.matches(&l) {
					at[l.Seq] = len(out)
					out = append(out, l.record())
				}
			} else if i, ok := at[l.Seq]; ok {
				out[i].ended(&l)
			}
		}
	}
	pruned := j.pruned.Load()
	for len(out) > 0 && out[0].Seq <= pruned {
		out = out[1:]
	}
	return out, nil
}

// OpenKept opens kept/<seq>, the version change seq replaced or removed,
// as an O_PATH fd (the caller's to close; dirfd.Reopen reads a file's).
func (j *Journal) OpenKept(seq uint64) (int, error) {
	return jdir.OpenKept(j.kept, j.keptName(seq))
}
