// Package diff writes the diff of a window of the journal of changes
// (realmfs journal diff; docs/JOURNAL.md): each path's state before the
// window's first change to it, found by identity in the journal's kept/
// or at a name now, against BACKING now: a unified diff of text files,
// sizes otherwise, files, directories and symlinks made and removed,
// renames as renames, mode and owner changes. BACKING is read beneath its
// root fd through fusefs/dirfd, no symlink followed.
package diff

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// TextLimit: a file larger than this is shown by its sizes, not diffed.
const TextLimit = 1 << 20

// lineage is an object of the world before the window: the name it had
// then, what it was, and the name the window's changes left it at.
type lineage struct {
	name  string          // its name before the window
	obj   *journal.Object // what it was
	at    string          // where it is now ("": removed or replaced)
	first uint64          // the seq of the window's first change to it
}

// changeModel replays the window's changes over names: which lineage
// each name touched holds now (nil: a new object, or nothing).
type changeModel struct {
	names    map[string]*lineage
	touched  map[string]uint64 // each name's first change's seq
	order    []string          // the names, in the order first touched
	lins     []*lineage
	dirMoves [][2]string           // the directories renamed, in order
	kept     map[journal.ID]uint64 // a kept object's identity → its seq
}

func newChangeModel() *changeModel {
	return &changeModel{names: map[string]*lineage{}, touched: map[string]uint64{}, kept: map[journal.ID]uint64{}}
}

// beforeName is the name that name had before the window, through the
// directory renames since.
func (m *changeModel) beforeName(name string) string {
	for i := len(m.dirMoves) - 1; i >= 0; i-- {
		from, to := m.dirMoves[i][0], m.dirMoves[i][1]
		if rest, ok := strings.CutPrefix(name, to+"/"); ok {
			name = from + "/" + rest
		}
	}
	return name
}

// touch notes the window's first change to name, which found obj there
// (nil: nothing).
func (m *changeModel) touch(name string, obj *journal.Object, seq uint64) {
	if _, ok := m.touched[name]; ok {
		return
	}
	m.touched[name] = seq
	m.order = append(m.order, name)
	if obj == nil {
		m.names[name] = nil
		return
	}
	l := &lineage{name: m.beforeName(name), obj: obj, at: name, first: seq}
	m.lins = append(m.lins, l)
	m.names[name] = l
}

// vacate makes name hold nothing of the world before.
func (m *changeModel) vacate(name string) {
	if l := m.names[name]; l != nil && l.at == name {
		l.at = ""
	}
	m.names[name] = nil
}

// apply replays one change (an aborted one changed nothing).
func (m *changeModel) apply(r *journal.Record) {
	if r.End == journal.Aborted {
		return
	}
	if r.Kept {
		if obj := r.Before; r.Op == journal.OpRename {
			obj = r.Replaced
			if obj != nil {
				m.kept[obj.ID()] = r.Seq
			}
		} else if obj != nil {
			m.kept[obj.ID()] = r.Seq
		}
	}
	switch r.Op {
	case journal.OpRename:
		m.rename(r)
	case journal.OpUnlink, journal.OpRmdir, journal.OpMkdir, journal.OpSymlink, journal.OpMknod:
		m.touch(r.Path, r.Before, r.Seq)
		m.vacate(r.Path)
	case journal.OpLink:
		m.touch(r.Path, r.Before, r.Seq)
		m.touch(r.To, nil, r.Seq)
		m.vacate(r.To)
	default: // the content or metadata of the object at Path
		m.touch(r.Path, r.Before, r.Seq)
	}
}

// rename moves what Path holds to To, and with a directory every name
// touched beneath it.
func (m *changeModel) rename(r *journal.Record) {
	m.touch(r.Path, r.Before, r.Seq)
	m.touch(r.To, r.Replaced, r.Seq)
	l := m.names[r.Path]
	m.vacate(r.To)
	m.names[r.Path] = nil
	m.names[r.To] = l
	if l != nil {
		l.at = r.To
	}
	if r.Before == nil || r.Before.Type != "dir" {
		return
	}
	m.dirMoves = append(m.dirMoves, [2]string{r.Path, r.To})
	for _, name := range slices.Clone(m.order) {
		rest, ok := strings.CutPrefix(name, r.Path+"/")
		if !ok {
			continue
		}
		moved := r.To + "/" + rest
		if _, ok := m.touched[moved]; !ok {
			m.touched[moved] = m.touched[name]
			m.order = append(m.order, moved)
		}
		l := m.names[name]
		m.names[name], m.names[moved] = nil, l
		if l != nil {
			l.at = moved
		}
	}
}

// objState is an object as the diff compares it.
type objState struct {
	exists   bool
	typ      string // file, dir, symlink, fifo, ...
	mode     uint32 // the permission bits (07777)
	uid, gid uint32
	size     int64
	id       journal.ID
	target   string // a symlink's
	unknown  string // why a file's content is not known ("large": past TextLimit)
	// Where a file's content is read from (differ.loaded): kept/<kept>,
	// else the name beneath BACKING; its first limit bytes (-1: all).
	kept  uint64
	name  string
	limit int64
	// content is a file's, once loaded (one entry's at a time).
	content []byte
}

// differ reads the states the diff compares: BACKING now, and the kept
// versions.
type differ struct {
	root int
	r    Kept
	m    *changeModel
	now  map[string]*objState
	byID map[journal.ID]*objState // the touched names' objects now; nil until asked
}

// nowState is name's state in BACKING now (walked beneath the root, no
// symlink followed).
func (d *differ) nowState(name string) *objState {
	if s, ok := d.now[name]; ok {
		return s
	}
	s := &objState{name: name, limit: -1}
	d.now[name] = s
	dir, last, err := dirfd.WalkParent(d.root, name)
	if err != nil {
		return s
	}
	defer dirfd.Close(dir)
	fd, err := dirfd.OpenPath(dir, last)
	if err != nil {
		return s
	}
	defer dirfd.Close(fd)
	readState(fd, s)
	return s
}

// readState fills s from the object the O_PATH fd holds.
func readState(fd int, s *objState) {
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return
	}
	o := journal.ObjectOf(&st)
	s.exists, s.typ, s.mode, s.uid, s.gid, s.size, s.id = true, o.Type, o.Mode&0o7777, o.Uid, o.Gid, o.Size, o.ID()
	switch s.typ {
	case "symlink":
		s.target, _ = dirfd.Readlink(fd)
	case "file":
		if st.Size > TextLimit {
			s.unknown = "large"
		}
	}
}

// loaded is s with a file's content read (or why not in unknown): the
// object its source holds, verified to be s's.
func (d *differ) loaded(s *objState) *objState {
	if !s.exists || s.typ != "file" || s.unknown != "" {
		return s
	}
	c := *s
	var fd int
	var err error
	if s.kept != 0 {
		fd, err = d.r.OpenKept(s.kept)
	} else {
		var dir int
		var last string
		if dir, last, err = dirfd.WalkParent(d.root, s.name); err == nil {
			fd, err = dirfd.OpenPath(dir, last)
			dirfd.Close(dir)
		}
	}
	if err != nil {
		c.unknown = err.Error()
		return &c
	}
	defer dirfd.Close(fd)
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil || (journal.ID{Dev: st.Dev, Ino: st.Ino}) != s.id {
		c.unknown = "changed while read"
		return &c
	}
	c.content, c.unknown = readContent(fd, s.limit)
	return &c
}

// readContent reads a file's first limit bytes (-1: all), up to
// TextLimit.
func readContent(fd int, limit int64) ([]byte, string) {
	if limit < 0 || limit > TextLimit {
		limit = TextLimit + 1
	}
	rfd, err := dirfd.Reopen(fd, unix.O_RDONLY)
	if err != nil {
		return nil, err.Error()
	}
	f := os.NewFile(uintptr(rfd), "content")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, err.Error()
	}
	if len(b) > TextLimit {
		return nil, "large"
	}
	return b, ""
}

// beforeState is lineage l's state before the window: the record's
// metadata, and the content of its object found by identity, kept in
// kept/ or still at a name (its first l.obj.Size bytes: an append since
// leaves them as they were).
func (d *differ) beforeState(l *lineage) *objState {
	o := l.obj
	s := &objState{exists: true, typ: o.Type, mode: o.Mode & 0o7777, uid: o.Uid, gid: o.Gid, size: o.Size, id: o.ID()}
	if s.typ != "file" && s.typ != "symlink" {
		return s
	}
	found := &objState{}
	if seq, ok := d.m.kept[o.ID()]; ok {
		if fd, err := d.r.OpenKept(seq); err == nil {
			readState(fd, found)
			found.kept = seq
			dirfd.Close(fd)
		}
	}
	if !found.exists || found.id != o.ID() {
		if now, ok := d.objectNow(o.ID()); ok {
			found = now
		}
	}
	switch {
	case !found.exists || found.id != o.ID() || found.typ != s.typ:
		s.unknown = "not kept"
	case s.typ == "symlink":
		s.target = found.target
	case found.size < o.Size:
		s.unknown = "changed in place"
	case found.unknown != "" && (found.unknown != "large" || o.Size > TextLimit):
		s.unknown = found.unknown
	default:
		s.kept, s.name, s.limit = found.kept, found.name, o.Size
	}
	return s
}

// objectNow is the object of identity id at one of the names the window
// touched, as it is now.
func (d *differ) objectNow(id journal.ID) (*objState, bool) {
	if d.byID == nil {
		d.byID = map[journal.ID]*objState{}
		for _, name := range d.m.order {
			if s := d.nowState(name); s.exists && d.byID[s.id] == nil {
				d.byID[s.id] = s
			}
		}
	}
	s, ok := d.byID[id]
	return s, ok
}

// diffEntry is one path's part of the diff, in the order of the window's
// first change to it.
type diffEntry struct {
	seq    uint64
	bn, nn string
	before *objState
	now    *objState
}

// Kept opens the version a change kept (journal.Reader, journal.Journal).
type Kept interface {
	OpenKept(seq uint64) (int, error)
}

// Item is a file whose content the diff would show: the path it shows it
// at, and its identity.
type Item struct {
	Path string     `json:"path"`
	ID   journal.ID `json:"id"`
}

// Withheld reports, for each item, whether its content is withheld: a
// credential under the mount's policy, by its path or by its identity (a
// hard link to one under another name). Nil withholds nothing.
type Withheld func(items []Item) ([]bool, error)

// withheldNote is what the diff says of a credential's content.
const withheldNote = "withheld (a credential)"

// Write writes the diff of the window's changes recs (oldest first): each
// path's state before its first change in the window against BACKING now
// (root: its root directory's fd). The content of a file withheld judges a
// credential is not read, on either side of its entry: the journal keeps
// what an agent removed, and BACKING has what the host wrote since, and
// neither may reach the diff's reader when the mount refuses it to them.
func Write(w io.Writer, root int, r Kept, recs []journal.Record, withheld Withheld) error {
	m := newChangeModel()
	for i := range recs {
		m.apply(&recs[i])
	}
	d := &differ{root: root, r: r, m: m, now: map[string]*objState{}}
	var entries []diffEntry
	reused := map[string]bool{}
	for _, l := range m.lins {
		e := diffEntry{seq: l.first, bn: l.name, before: d.beforeState(l), nn: l.at}
		if l.at == "" && m.names[l.name] == nil {
			if _, ok := m.touched[l.name]; ok && d.nowState(l.name).exists {
				e.nn, reused[l.name] = l.name, true // replaced at its name
			}
		}
		e.now = &objState{}
		if e.nn != "" {
			e.now = d.nowState(e.nn)
		}
		entries = append(entries, e)
	}
	for _, name := range m.order {
		if m.names[name] == nil && !reused[name] {
			entries = append(entries, diffEntry{seq: m.touched[name], nn: name, before: &objState{}, now: d.nowState(name)})
		}
	}
	slices.SortStableFunc(entries, func(a, b diffEntry) int { return cmpSeq(a.seq, b.seq) })
	if err := withhold(entries, withheld); err != nil {
		return err
	}
	b := bufio.NewWriter(w)
	for _, e := range entries {
		writeEntry(b, d.loaded(e.before), d.loaded(e.now), e.bn, e.nn)
	}
	return b.Flush()
}

// withhold marks the content of both sides of each entry that has a
// credential on either side as not to be read: a diff of the two would
// show it.
func withhold(entries []diffEntry, withheld Withheld) error {
	if withheld == nil {
		return nil
	}
	var items []Item
	var of []int // the entry of each item
	for i, e := range entries {
		for _, side := range []struct {
			name string
			s    *objState
		}{{e.bn, e.before}, {e.nn, e.now}} {
			if side.s.exists && side.s.typ == "file" {
				items = append(items, Item{Path: side.name, ID: side.s.id})
				of = append(of, i)
			}
		}
	}
	if len(items) == 0 {
		return nil
	}
	credential, err := withheld(items)
	if err != nil {
		return fmt.Errorf("asking which files are credentials: %w", err)
	}
	if len(credential) != len(items) {
		return fmt.Errorf("asking which files are credentials: %d answers for %d files", len(credential), len(items))
	}
	for k, c := range credential {
		if c {
			e := &entries[of[k]]
			e.before.unknown, e.now.unknown = withheldNote, withheldNote
		}
	}
	return nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeEntry writes one path's part of the diff.
func writeEntry(b *bufio.Writer, bs, ns *objState, bn, nn string) {
	switch {
	case !bs.exists && !ns.exists:
	case !bs.exists:
		writeCreated(b, nn, ns)
	case !ns.exists:
		writeDeleted(b, bn, bs)
	case bs.typ != ns.typ:
		writeDeleted(b, bn, bs)
		writeCreated(b, nn, ns)
	default:
		writeChanged(b, bn, nn, bs, ns)
	}
}

// kindOf names an object's type as the diff says it.
func kindOf(typ string) string {
	if typ == "dir" {
		return "directory"
	}
	return typ
}

func writeCreated(b *bufio.Writer, name string, s *objState) {
	p := ShowPath(name)
	switch s.typ {
	case "symlink":
		fmt.Fprintf(b, "created symlink %s → %s\n", p, ShowPath(s.target))
	case "file":
		if s.unknown != "" && s.unknown != "large" {
			fmt.Fprintf(b, "created file %s: %d bytes, its content %s\n", p, s.size, s.unknown)
			return
		}
		if !isText(s) {
			fmt.Fprintf(b, "created file %s: binary, %d bytes\n", p, s.size)
			return
		}
		fmt.Fprintf(b, "created file %s\n", p)
		b.WriteString(udiff.Unified("/dev/null", "b/"+name, "", string(s.content)))
	default:
		fmt.Fprintf(b, "created %s %s\n", kindOf(s.typ), p)
	}
}

func writeDeleted(b *bufio.Writer, name string, s *objState) {
	p := ShowPath(name)
	switch {
	case s.typ == "symlink":
		fmt.Fprintf(b, "deleted symlink %s → %s\n", p, ShowPath(s.target))
	case s.typ != "file":
		fmt.Fprintf(b, "deleted %s %s\n", kindOf(s.typ), p)
	case s.unknown != "" && s.unknown != "large":
		fmt.Fprintf(b, "deleted file %s: %d bytes, its content %s\n", p, s.size, s.unknown)
	case !isText(s):
		fmt.Fprintf(b, "deleted file %s: binary, %d bytes\n", p, s.size)
	default:
		fmt.Fprintf(b, "deleted file %s\n", p)
		b.WriteString(udiff.Unified("a/"+name, "/dev/null", string(s.content), ""))
	}
}

// writeChanged writes what changed of an object that is still there, of
// the same type: its name, its mode, its owner, its content.
func writeChanged(b *bufio.Writer, bn, nn string, bs, ns *objState) {
	headed := bn != nn
	if headed {
		fmt.Fprintf(b, "renamed %s → %s\n", ShowPath(bn), ShowPath(nn))
	}
	p := ShowPath(nn)
	if bs.mode != ns.mode {
		fmt.Fprintf(b, "mode %s: %04o → %04o\n", p, bs.mode, ns.mode)
	}
	if bs.uid != ns.uid || bs.gid != ns.gid {
		fmt.Fprintf(b, "owner %s: %d:%d → %d:%d\n", p, bs.uid, bs.gid, ns.uid, ns.gid)
	}
	switch bs.typ {
	case "symlink":
		if bs.target != ns.target {
			fmt.Fprintf(b, "modified symlink %s: → %s, now → %s\n", p, ShowPath(bs.target), ShowPath(ns.target))
		}
	case "file":
		writeContentChange(b, bn, nn, bs, ns, headed)
	}
}

// writeContentChange writes how a file's content changed.
func writeContentChange(b *bufio.Writer, bn, nn string, bs, ns *objState, headed bool) {
	p := ShowPath(nn)
	switch {
	case bs.unknown == "large" && ns.unknown == "large":
		if bs.id != ns.id || bs.size != ns.size {
			fmt.Fprintf(b, "modified %s: binary, %d → %d bytes\n", p, bs.size, ns.size)
		}
	case bs.unknown == withheldNote:
		if bs.id != ns.id || bs.size != ns.size {
			fmt.Fprintf(b, "modified %s: %d → %d bytes, its content %s\n", p, bs.size, ns.size, withheldNote)
		}
	case bs.unknown != "" && bs.unknown != "large":
		fmt.Fprintf(b, "modified %s: %d → %d bytes, the content before %s\n", p, bs.size, ns.size, bs.unknown)
	case bs.unknown == "" && ns.unknown == "" && bytes.Equal(bs.content, ns.content):
	case isText(bs) && isText(ns):
		if !headed {
			fmt.Fprintf(b, "modified %s\n", p)
		}
		b.WriteString(udiff.Unified("a/"+bn, "b/"+nn, string(bs.content), string(ns.content)))
	default:
		fmt.Fprintf(b, "modified %s: binary, %d → %d bytes\n", p, bs.size, ns.size)
	}
}

// isText: a file's content is known, UTF-8 and holds no NUL.
func isText(s *objState) bool {
	return s.unknown == "" && utf8.Valid(s.content) && !bytes.ContainsRune(s.content, 0)
}

// ShowPath is a path as a line shows it: as it is, or quoted (Go syntax)
// where it holds what would break the line or hide in it (control or
// invalid bytes, spaces at its ends, an arrow).
func ShowPath(p string) string {
	if p == "" {
		return `""`
	}
	plain := utf8.ValidString(p) && strings.TrimSpace(p) == p && !strings.Contains(p, " → ")
	for _, r := range p {
		if !unicode.IsPrint(r) && r != ' ' {
			plain = false
		}
	}
	if plain {
		return p
	}
	return strconv.Quote(p)
}
