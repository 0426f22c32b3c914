package journal

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/carry"
	"github.com/realm-dev/realm/fusefs/journal/jdir"
	"github.com/realm-dev/realm/fusefs/journal/keptname"
	"github.com/realm-dev/realm/fusefs/journal/moved"
)

// loaded is what Open's reading of the segments found: the intents still
// open, and the end of each intent that kept a version.
type loaded struct {
	open   map[uint64]line
	kept   map[uint64]End // "" while open
	maxSeq uint64
	// renames are the log's renames not ended aborted: where an open
	// intent's names are now (package moved).
	renames moved.Log
}

// noteRename records a rename intent line of the log in ld.renames.
func (ld *loaded) noteRename(l *line) {
	if l.Op == OpRename && l.To != "" {
		ld.renames.Add(moved.Rename{Seq: l.Seq, From: string(l.Path), To: string(l.To)})
	}
}

// load reads the pruned mark and the segments, cuts a torn tail, resolves
// the open intents and sweeps kept/ of what no record needs.
func (j *Journal) load() error {
	pruned, err := jdir.ReadPruned(j.dir)
	if err != nil {
		return err
	}
	j.pruned.Store(pruned)
	nums, err := listSegments(j.log)
	if err != nil {
		return err
	}
	ld := loaded{open: map[uint64]line{}, kept: map[uint64]End{}, maxSeq: pruned}
	for i, num := range nums {
		if err := j.loadSegment(num, i == len(nums)-1, pruned, &ld); err != nil {
			return err
		}
		j.lastNum = num
	}
	ents, closeGroups, err := j.listKept()
	if err != nil {
		return err
	}
	defer closeGroups()
	carried, err := carriedPast(int(j.lock.Fd()), ld.maxSeq)
	if err != nil {
		return err
	}
	if err := j.rebuildLost(ents, carried, &ld); err != nil {
		return err
	}
	j.next = ld.maxSeq + 1
	if err := j.resolveAll(&ld); err != nil {
		return err
	}
	if err := j.sweepKept(ents, &ld); err != nil {
		return err
	}
	j.groups.RemoveThrough(j.pruned.Load())
	if j.opts.Durable && j.written > 0 {
		if err := j.syncTo(j.written, 0, true); err != nil {
			return err
		}
	}
	if err := carry.Clear(int(j.lock.Fd())); err != nil { // what it carried is in the log now
		return fmt.Errorf("journal: emptying %s's %s: %w", lockName, carry.Attr, err)
	}
	return nil
}

// carriedPast is what LOCK (fd) carries past seq: the intents a crash
// lost from the log (package carry).
func carriedPast(fd int, seq uint64) ([]line, error) {
	b, err := carry.Read(fd)
	if err != nil {
		return nil, fmt.Errorf("journal: reading %s's %s: %w", lockName, carry.Attr, err)
	}
	var lost []line
	for _, l := range parseSegment(b).lines {
		if l.Op != "" && l.Seq > seq {
			lost = append(lost, l)
		}
	}
	return lost, nil
}

// loadSegment reads segment num into the journal's summary and ld. The
// last one becomes the segment appended to, its torn tail cut; an earlier
// one holding nothing past pruned (an interrupted prune's) is removed.
func (j *Journal) loadSegment(num uint64, last bool, pruned uint64, ld *loaded) error {
	data, err := readSegment(j.log, num, -1)
	if err != nil {
		return fmt.Errorf("journal: reading log/%s: %w", segmentName(num), err)
	}
	j.recovery.Segments++
	sc := parseSegment(data)
	seg := &segment{num: num}
	for i := range sc.lines {
		l := &sc.lines[i]
		if l.Seq <= pruned {
			continue
		}
		seg.note(l)
		ld.maxSeq = max(ld.maxSeq, l.Seq)
		switch {
		case l.Op != "":
			j.recovery.Records++
			ld.open[l.Seq] = *l
			ld.noteRename(l)
			if l.Kept {
				ld.kept[l.Seq] = ""
			}
		default:
			delete(ld.open, l.Seq)
			if l.End == Aborted {
				ld.renames.Drop(l.Seq)
			}
			if _, ok := ld.kept[l.Seq]; ok {
				ld.kept[l.Seq] = l.End
			}
		}
	}
	if seg.max == 0 && sc.dirty == sc.valid && (!last || len(sc.lines) > 0) {
		if err := dirfd.Unlink(j.log, segmentName(num), 0); err != nil {
			return fmt.Errorf("journal: removing the pruned log/%s: %w", segmentName(num), err)
		}
		j.recovery.SegmentsRemoved++
		return nil
	}
	j.segs = append(j.segs, seg)
	if !last {
		if sc.dirty > sc.valid {
			j.recovery.Damaged++
		}
		return nil
	}
	if err := openSegment(j.log, seg, sc.valid, sc.dirty, j.opts.Durable); err != nil {
		return err
	}
	j.recovery.CutBytes = sc.dirty - sc.valid
	j.cur = seg
	return nil
}

// place is what a name leads to now: nothing (absent), an object (found,
// its id), or neither (it could not be told: a symlink on the way, an
// error).
type place struct {
	absent, found bool
	id            ID
}

// is reports whether the name leads to the object id.
func (p place) is(id ID) bool { return p.found && p.id == id }

// lookup is where path leads now, beneath the root, with no symlink
// followed.
func (j *Journal) lookup(path string) place {
	if path == "" {
		return place{}
	}
	dir, name, err := dirfd.WalkParent(j.root, path)
	if err != nil {
		return place{absent: errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)}
	}
	defer dirfd.Close(dir)
	var st unix.Stat_t
	if _, err := dirfd.Statx(dir, name, &st); err != nil {
		return place{absent: errors.Is(err, unix.ENOENT)}
	}
	return place{found: true, id: ID{st.Dev, st.Ino}}
}

// judge tells, by what the record's names lead to now, whether its change
// happened (after), did not (before), or neither.
func judge(l *line, p, to place) (after, before bool) {
	switch l.Op {
	case OpUnlink, OpRmdir:
		return p.absent, l.Before != nil && p.is(l.Before.ID())
	case OpRename:
		if l.Before == nil {
			return false, false
		}
		moved := l.Before.ID()
		return to.is(moved) && !p.is(moved), p.is(moved)
	case OpLink:
		return l.Before != nil && to.is(l.Before.ID()), to.absent
	}
	if l.Before == nil {
		before = p.absent
	} else {
		before = p.is(l.Before.ID())
	}
	switch {
	case l.After != nil:
		after = p.is(*l.After)
	case l.Before == nil: // made: its identity was not known before
		after = p.found
	default: // in place: the identity stays, the change cannot be told
		after = before
	}
	return after, before
}

// resolveAll ends each open intent as its names say, judged newest first
// at the names the renames after it left them (package moved: a rename
// judged not made moves nothing); the ends are appended in seq order.
func (j *Journal) resolveAll(ld *loaded) error {
	for _, l := range ld.open {
		ld.noteRename(&l) // the carried ones too
	}
	type ending struct {
		end  End
		left *ID
	}
	ends := map[uint64]ending{}
	seqs := slices.Sorted(maps.Keys(ld.open))
	for i, seq := range slices.Backward(seqs) {
		l := ld.open[seq]
		p, to := j.lookup(ld.renames.Since(string(l.Path), seq)), j.lookup(ld.renames.Since(string(l.To), seq))
		after, before := judge(&l, p, to)
		if before && p.absent && madeOps[l.Op] && l.Before == nil && l.After == nil {
			if id, ok := ld.madeThen(&l, seqs[i+1:]); ok {
				after, before, p = true, false, place{found: true, id: id}
			}
		}
		e := ending{end: Done}
		switch {
		case after:
			j.recovery.Done++
			if l.After == nil && l.Before == nil && p.found {
				e.left = &p.id
			}
		case before:
			j.recovery.Aborted++
			e.end = Aborted
			ld.renames.Drop(seq)
			if l.Kept && j.dropLink(seq) {
				j.recovery.KeptRemoved++
			}
		default:
			j.recovery.Outside++
		}
		ends[seq] = e
	}
	for _, seq := range seqs {
		if _, ok := ld.kept[seq]; ok {
			ld.kept[seq] = ends[seq].end
		}
		if err := j.appendEnd(seq, ends[seq].end, ends[seq].left); err != nil {
			return err
		}
	}
	return nil
}

// madeThen is the object an open intent that made one (l: a create,
// mkdir, symlink or mknod whose object was not known) left at its name,
// as the first later open intent (later: their seqs, ascending) that
// names it, carried through the renames between, found it: its Before
// there (a removal or a rename of it), or what a rename over it replaced.
// A kill -9 that lost the make's end can lose that removal's too (and its
// intent, which its described kept/ entry rebuilds), and an empty name
// alone reads as a make never done: undo would put the removed object
// back and leave it. The kernel orders two changes of one name (its
// directory's lock), and a make that failed writes its aborted end at
// once, before it answers: what a later change found there, of the type
// the make makes, is what it made.
func (ld *loaded) madeThen(l *line, later []uint64) (ID, bool) {
	for _, seq := range later {
		r := ld.open[seq]
		obj := r.Before
		switch ld.renames.Between(string(l.Path), l.Seq, seq) {
		case string(r.Path):
		case string(r.To):
			obj = r.Replaced
		default:
			continue
		}
		if obj == nil || MakeOp(obj.Type) != l.Op {
			return ID{}, false
		}
		return obj.ID(), true
	}
	return ID{}, false
}

// dropLink removes kept/<seq> where it is a link to an object linked
// elsewhere too (an aborted change's: the object is still at its name),
// never the only link to one, and reports whether it did.
func (j *Journal) dropLink(seq uint64) bool {
	kdir, entry, done, err := j.keptAt(seq)
	if err != nil {
		return false
	}
	defer done()
	var st unix.Stat_t
	if err := dirfd.Lstat(kdir, entry, &st); err != nil {
		return false
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR || st.Nlink < 2 {
		return false
	}
	if dirfd.Unlink(kdir, entry, 0) != nil {
		return false
	}
	j.described.Delete(seq)
	return true
}

// sweepKept removes the entries of kept/ no record needs: those of pruned
// changes (a prune interrupted), those past every record (a torn intent's:
// its change was never made, or made with no durable record), and an
// aborted change's link. An entry of a change recorded done, or that
// cannot be told, stays.
func (j *Journal) sweepKept(ents []jdir.KeptEnt, ld *loaded) error {
	pruned := j.pruned.Load()
	for _, e := range ents {
		seq, ok := keptname.Seq(e.Name)
		if !ok {
			continue
		}
		if e.Rel != keptEntry(seq) && j.keptName(seq) != e.Rel {
			continue // neither kept/<seq> nor a described entry
		}
		end, recorded := ld.kept[seq]
		switch {
		case seq <= pruned || seq > ld.maxSeq:
			if jdir.RemoveKept(e.Dir, e.Name) == nil {
				j.described.Delete(seq)
				j.recovery.KeptRemoved++
			}
		case recorded && end == Aborted:
			if j.dropLink(seq) {
				j.recovery.KeptRemoved++
				continue
			}
			fallthrough
		default:
			if id, ok := keptID(e.Dir, e.Name); ok {
				j.noteKeptLocked(id, seq) // Open: no other caller yet
			}
		}
	}
	return nil
}

// rebuildLost appends the intents a crash lost from the log, past every
// record Open read (ld.maxSeq), in seq order: the removals of the
// described entries of kept/ (ents), whose held lines a kill -9 or a
// power loss lost, and those LOCK carried past it (carried).
// Each is left open in ld, for resolveAll to end by what its path leads
// to now. Every described entry's name is noted for keptName first.
func (j *Journal) rebuildLost(ents []jdir.KeptEnt, carried []line, ld *loaded) error {
	lost := carried
	for _, de := range ents {
		e, ok := keptname.Parse(de.Name)
		if !ok {
			continue
		}
		j.described.Store(e.Seq, de.Rel)
		if e.Seq <= ld.maxSeq {
			continue
		}
		var st unix.Stat_t
		if err := dirfd.Lstat(de.Dir, de.Name, &st); err != nil {
			return fmt.Errorf("journal: kept/%s: %w", de.Rel, err)
		}
		lost = append(lost, describedIntent(&e, &st))
	}
	slices.SortStableFunc(lost, func(a, b line) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, l := range slices.CompactFunc(lost, func(a, b line) bool { return a.Seq == b.Seq }) {
		j.next = l.Seq
		if _, err := j.appendLine(func() line { return l }); err != nil {
			return err
		}
		ld.open[l.Seq], ld.maxSeq = l, l.Seq
		if l.Kept {
			ld.kept[l.Seq] = ""
		}
		j.recovery.Rebuilt++
	}
	return nil
}
