package journal

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

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
				out[i].End = l.End
				if out[i].After == nil {
					out[i].After = l.After
				}
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
	return dirfd.OpenPath(j.kept, keptEntry(seq))
}
