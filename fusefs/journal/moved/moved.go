// Package moved carries a path through the renames recorded after a
// point of the journal's log: where a change's names are now. Recovery
// judges each intent a crash left open by what its names lead to; a later
// rename, done or itself open, may have moved one of them or a directory
// above it since (a symlink made in dK, then dK renamed to d5, both ends
// lost): judged at its old name the change looks never made, and undo
// would leave what it made behind. It is pure: no file is touched.
package moved

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Rename is one recorded rename: its log seq, and the workspace paths it
// moved from and to.
type Rename struct {
	Seq      uint64
	From, To string
}

// Log is the renames of a log that still stand, by seq. Its zero value is
// empty and ready.
type Log struct {
	by     map[uint64]Rename
	sorted []Rename // by seq; nil once by changes
}

// Add records r.
func (l *Log) Add(r Rename) {
	if l.by == nil {
		l.by = map[uint64]Rename{}
	}
	l.by[r.Seq], l.sorted = r, nil
}

// Drop forgets the rename seq: it did not happen.
func (l *Log) Drop(seq uint64) {
	if _, ok := l.by[seq]; ok {
		delete(l.by, seq)
		l.sorted = nil
	}
}

// Since is path carried through the renames after seq, in seq order.
func (l *Log) Since(path string, seq uint64) string {
	return l.Between(path, seq, math.MaxUint64)
}

// Between is path carried through the renames after seq and before end,
// in seq order: where a change's name was when a later change (end) was
// recorded.
func (l *Log) Between(path string, seq, end uint64) string {
	if path == "" || len(l.by) == 0 {
		return path
	}
	if l.sorted == nil {
		for _, r := range l.by {
			l.sorted = append(l.sorted, r)
		}
		slices.SortFunc(l.sorted, func(a, b Rename) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	i, _ := slices.BinarySearchFunc(l.sorted, seq+1, func(r Rename, s uint64) int { return cmp.Compare(r.Seq, s) })
	for _, r := range l.sorted[i:] {
		if r.Seq >= end {
			break
		}
		switch {
		case path == r.From:
			path = r.To
		case strings.HasPrefix(path, r.From+"/"):
			path = r.To + path[len(r.From):]
		}
	}
	return path
}
