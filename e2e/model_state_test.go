package e2e

// The reference model of TestModel (model_test.go): what docs/atomic-writes.md
// promises a process on the mount sees, as a state machine. Each rule
// names docs/atomic-writes.md passage it comes from ("Atomic writes and the lock
// table", rules 1–6 of "When a commit happens", and the bullets after
// them); where docs/atomic-writes.md leaves a case open, the rule is the code's and
// the comment says where (fusefs/file.go, pending.go, commit.go).
//
// The model knows files as objects (a name leads to one; a rename moves
// it), lock owners by letter (A, B: one Unix session each, lockowner=
// session), processes by name (A0 is owner A's first, the checker; A1…
// are children forked from another of A's), and open file descriptions
// (handles) with the descriptors each process holds of them.

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// modelNames are the files the model drives; BACKING starts with each
// holding "init-NAME|".
var modelNames = []string{"f0", "f1", "f2"}

// mop is one step: Proc does Kind.
type mop struct {
	Kind  string   // open dup fork write pwrite setfl trunc read close fsync kill rename crash
	Proc  string   // the process doing it (kill: the one killed)
	Slot  string   // its descriptor (open, dup: the new one)
	Slot2 string   // dup: the descriptor duplicated
	Name  string   // open, rename: the file; rename: from
	Name2 string   // rename: to
	Mode  string   // open: RDONLY TRUNC RDWR APPEND EXCL
	Data  string   // write, pwrite
	Size  int      // trunc; pwrite: the offset
	On    bool     // setfl: O_APPEND set (true) or cleared
	Child string   // fork: the new process
	Slots []string // fork: the descriptors it inherits
	// race: Proc's write open (Slot, Name, Mode), or First, sent, and
	// before its answer, Other (a write, fsync or close of the file by
	// another process, of either owner). First: another process's rename
	// of the file, or its write, ftruncate, fsync or close through
	// another open of it (modelGen.raceFirst).
	First, Other *mop
	// order: the order a race's two calls took in the daemon (0: Other
	// first, 1: the open first); the runner finds it from the answers.
	// ambiguous: both orders gave those answers.
	order     int
	ambiguous bool
}

func (o mop) String() string {
	switch o.Kind {
	case "open":
		return fmt.Sprintf("%s open %s %s %s", o.Proc, o.Slot, o.Name, o.Mode)
	case "dup":
		return fmt.Sprintf("%s dup %s -> %s", o.Proc, o.Slot2, o.Slot)
	case "fork":
		return fmt.Sprintf("%s fork %s inheriting [%s]", o.Proc, o.Child, strings.Join(o.Slots, " "))
	case "write":
		return fmt.Sprintf("%s write %s %q", o.Proc, o.Slot, o.Data)
	case "pwrite":
		return fmt.Sprintf("%s pwrite %s %d %q", o.Proc, o.Slot, o.Size, o.Data)
	case "setfl":
		return fmt.Sprintf("%s fcntl %s F_SETFL append=%v", o.Proc, o.Slot, o.On)
	case "trunc":
		return fmt.Sprintf("%s ftruncate %s %d", o.Proc, o.Slot, o.Size)
	case "read", "close", "fsync":
		return fmt.Sprintf("%s %s %s", o.Proc, o.Kind, o.Slot)
	case "kill":
		return fmt.Sprintf("kill -9 %s", o.Proc)
	case "rename":
		return fmt.Sprintf("%s rename %s %s", o.Proc, o.Name, o.Name2)
	case "crash":
		return "kill -9 realmfs; restart"
	case "race":
		return fmt.Sprintf("race { %s | %s }", o.raceOpen(), o.Other)
	}
	return o.Kind
}

// applyRace runs a race op in its order and returns the answers of
// o.Other and of the open.
func (m *model) applyRace(o mop) (other, open string) {
	if o.order == 1 {
		open = m.apply(o.raceOpen())
		return m.apply(*o.Other), open
	}
	other = m.apply(*o.Other)
	return other, m.apply(o.raceOpen())
}

// raceOpen is the first half of a race op: its open, or First.
func (o mop) raceOpen() mop {
	if o.First != nil {
		return *o.First
	}
	open := o
	open.Kind, open.Other = "open", nil
	return open
}

// lockModeOf is the lock an open in mode takes (fusefs/pending.go
// lockMode): an append without O_TRUNC shares the file with other owners'
// appends (locks.Append); every other write excludes every other owner
// (locks.Write). A reader joining the owner's write takes Append, the
// weakest hold (openShared).
func lockModeOf(mode string) string {
	if mode == "APPEND" || mode == "RDONLY" {
		return "A"
	}
	return "W"
}

// busy reports whether a write open of name by owner in mode must get
// EBUSY now (locks.Table.AcquireMode): another owner holds the file's lock
// and either of the two writes (docs/atomic-writes.md: appenders of different owners
// "share the file's append lock …; it excludes another owner's rewrite or
// in-place write, and theirs it").
func (m *model) busy(owner, name, mode string) bool {
	obj := m.names[name]
	for k, w := range m.writes {
		if obj != nil && k.obj == obj && k.owner != owner && (lockModeOf(mode) == "W" || w.writes()) {
			return true
		}
	}
	return false
}

// heldByOther reports whether another owner than owner holds obj's lock in
// any mode: a rename over the file is EBUSY (fusefs/renamelock.go).
func (m *model) heldByOther(owner string, obj *mobj) bool {
	for k := range m.writes {
		if obj != nil && k.obj == obj && k.owner != owner {
			return true
		}
	}
	return false
}

// mver is one backing file (inode) a name led to: a commit's rename puts
// a new one in place; an append in place grows the one there. A plain
// reader reads the one it opened ("a descriptor opened before a commit
// keeps reading what it opened"; "a descriptor opened before [an append]
// reads it").
type mver struct{ content string }

type mobj struct {
	id  int
	ver *mver // committed: what other owners and BACKING see
	// stamp counts the changes to the backing file (commits, appends in
	// place): a commit finds the file changed when it is not the stamp
	// its write observed (commit.go sameFile).
	stamp    int
	name     string // "" once no name leads to it
	lastName string
}

// mhandle is an open file description.
type mhandle struct {
	id      int
	obj     *mobj
	owner   string
	opener  string // the process that opened it
	write   bool   // opened for writing (every mode but RDONLY)
	read    bool   // may be read (RDONLY, RDWR)
	appends bool
	// truncates: opened O_TRUNC. fresh: the file was empty as its owner
	// saw it at the open (before the truncation): a killed opener tears
	// nothing by committing (docs/atomic-writes.md rule 5, "it created the file, or
	// found it empty").
	truncates, fresh bool
	w                *mwrite // the owner's write it shares; nil: a plain reader
	ver              *mver   // plain readers: the backing file opened
	off              int
	// flags: the open's access mode and O_APPEND as opened, its kind
	// (writeproto.Open.Kind). cur: as they are now (fcntl F_SETFL changes
	// O_APPEND), what /proc/PID/fdinfo shows of its descriptors. heard: as
	// the daemon last heard them, with the last WRITE through it
	// (writeHandle.appends), which a close's scan compares with cur
	// (File.sameOpen).
	flags, cur, heard string
	// openAppends: opened O_APPEND (the kill rule asks this, not appends).
	// setfl: F_SETFL changed O_APPEND since the open, so the kernel's file
	// position after an append is the kernel's, which the model does not
	// know: the generator writes through it at explicit offsets only.
	openAppends, setfl bool
	// lock: the lease's mode, "A" (locks.Append) or "W" (locks.Write).
	lock string
	// writing: a change (write, ftruncate, O_TRUNC) came through it since
	// its opener last closed its last descriptor and since the write's
	// last commit (docs/atomic-writes.md rule 5: "another of those
	// processes that has written (or truncated) the file since the last
	// commit still holds it"; writeproto.Handle.writing).
	writing bool
	descs   int // descriptors of it, in all processes
}

// mwrite is one owner's write in progress on one file: it exists while
// the owner has a handle of the file other than a plain reader, and is
// the lock (docs/atomic-writes.md: "another owner's write open … EBUSY").
type mwrite struct {
	obj        *mobj
	owner      string
	hs         map[*mhandle]bool
	temp       *string // the owner's uncommitted content, nil if none
	overwrites bool    // the temp holds a change other than appends at its end
	// observed: the file's stamp as this owner last saw it (at the open
	// that began the write, its own append in place or commit, a
	// conflict: pendingWrite.observed).
	observed int
	// base: the backing file the owner's write began on (or caught up
	// with, or committed), pendingWrite.base.
	base *mver
}

// catchUp: a write with nothing uncommitted whose file another owner's
// commit replaced moves to the new file and observes it, as the daemon
// does wherever it uses the file the write began on (fusefs/commit.go
// catchUp: cur, ensureTemp, appendsInPlace). Another owner's appends in
// place do not replace the file: a temp made after them still conflicts.
func (w *mwrite) catchUp() {
	if w.temp == nil && w.base != w.obj.ver {
		w.base, w.observed = w.obj.ver, w.obj.stamp
	}
}

// writeHandles counts the handles of w that may change the file (a
// reader sharing the write neither takes a killed writer's bytes over nor
// commits at its close: writeproto.Write.Killed, FlushStart).
func (w *mwrite) writeHandles() int {
	n := 0
	for h := range w.hs {
		if h.write {
			n++
		}
	}
	return n
}

// writes reports whether the owner holds the file for Write: one of its
// leases is (locks.Entry.writes).
func (w *mwrite) writes() bool {
	for h := range w.hs {
		if h.lock == "W" {
			return true
		}
	}
	return false
}

type mproc struct {
	id    string
	owner string
	alive bool
	slots map[string]*mhandle
}

type wkey struct {
	obj   *mobj
	owner string
}

// recovered is a copy kept beside a file: kind "recovered" (a killed
// writer's bytes) or "conflict" (a commit that found the file changed).
type recovered struct{ kind, name, content string }

type model struct {
	names     map[string]*mobj
	procs     map[string]*mproc
	writes    map[wkey]*mwrite
	recovered []recovered
	nextID    int
	// async: a commit of the last step happens at a RELEASE, which the
	// kernel sends after close(2) returned (docs/atomic-writes.md rule 6): the test waits
	// for BACKING to show it before looking.
	async bool
}

func newModel() *model {
	m := &model{names: map[string]*mobj{}, procs: map[string]*mproc{}, writes: map[wkey]*mwrite{}}
	for _, n := range modelNames {
		m.nextID++
		m.names[n] = &mobj{id: m.nextID, ver: &mver{"init-" + n + "|"}, name: n, lastName: n}
	}
	for _, o := range []string{"A", "B"} {
		m.procs[o+"0"] = &mproc{id: o + "0", owner: o, alive: true, slots: map[string]*mhandle{}}
	}
	return m
}

// view is what owner sees of obj: its own uncommitted bytes, else the
// committed content (docs/atomic-writes.md: "while an owner writes a file, it sees its
// own bytes and size …, and everyone else sees the file as committed").
func (m *model) view(obj *mobj, owner string) string {
	if w := m.writes[wkey{obj, owner}]; w != nil {
		w.catchUp() // the daemon's view is w.cur()
		if w.temp != nil {
			return *w.temp
		}
	}
	return obj.ver.content
}

// procIDs are the live processes, in a fixed order.
func (m *model) procIDs() []string {
	var ids []string
	for id, p := range m.procs {
		if p.alive {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (p *mproc) slotIDs() []string {
	var ids []string
	for s := range p.slots {
		ids = append(ids, s)
	}
	sort.Slice(ids, func(i, j int) bool { return slotNum(ids[i]) < slotNum(ids[j]) })
	return ids
}

func slotNum(s string) int {
	n, _ := strconv.Atoi(strings.TrimLeft(s, "sck"))
	return n
}

// valid reports whether op can run in this state: a shrunk trace drops
// ops whose process or descriptor is gone.
func (m *model) valid(o mop) bool {
	if o.Kind == "crash" {
		return true
	}
	p := m.procs[o.Proc]
	if p == nil || !p.alive {
		return false
	}
	h := p.slots[o.Slot]
	switch o.Kind {
	case "open":
		return h == nil
	case "dup":
		return h == nil && p.slots[o.Slot2] != nil
	case "fork":
		if m.procs[o.Child] != nil {
			return false
		}
		for _, s := range o.Slots {
			if p.slots[s] == nil {
				return false
			}
		}
		return true
	case "write", "pwrite", "setfl", "trunc":
		return h != nil && h.write
	case "read":
		return h != nil && h.read
	case "close", "fsync":
		return h != nil
	case "kill":
		return o.Proc != "A0" && o.Proc != "B0" // the checkers live
	case "rename":
		return o.Name != o.Name2
	case "race":
		if o.Other == nil || o.First != nil && (o.First.Proc == o.Other.Proc || !m.valid(*o.First)) {
			return false
		}
		return (o.First != nil || h == nil) && m.valid(*o.Other)
	}
	return false
}

// apply runs o on the model and returns the answer the mount must give.
func (m *model) apply(o mop) string {
	p := m.procs[o.Proc]
	switch o.Kind {
	case "open":
		return m.open(p, o.Slot, o.Name, o.Mode)
	case "dup":
		h := p.slots[o.Slot2]
		h.descs++
		p.slots[o.Slot] = h
		return "ok"
	case "fork":
		c := &mproc{id: o.Child, owner: p.owner, alive: true, slots: map[string]*mhandle{}}
		for _, s := range o.Slots {
			h := p.slots[s]
			h.descs++
			c.slots[s] = h
		}
		m.procs[c.id] = c
		// The worker passes each slot as a dup, which it closes once the
		// child has started (worker.fork): a close by p while it holds
		// the slot, whose answer no one hears.
		for _, s := range o.Slots {
			m.flush(p, p.slots[s])
		}
		return "ok"
	case "write":
		h := p.slots[o.Slot]
		h.off = m.write(h, o.Data, h.off)
		return fmt.Sprintf("ok %d", len(o.Data))
	case "pwrite":
		// pwrite(2) moves no file position, and on a descriptor with
		// O_APPEND appends whatever offset it is given (as Linux does).
		m.write(p.slots[o.Slot], o.Data, o.Size)
		return fmt.Sprintf("ok %d", len(o.Data))
	case "setfl":
		h := p.slots[o.Slot]
		h.appends, h.setfl = o.On, true
		h.cur = strings.TrimSuffix(h.cur, "a")
		if o.On {
			h.cur += "a"
		}
		return "ok"
	case "trunc":
		m.truncate(p.slots[o.Slot], o.Size)
		return "ok"
	case "read":
		h := p.slots[o.Slot]
		if h.w == nil {
			return "ok " + strconv.Quote(h.ver.content)
		}
		return "ok " + strconv.Quote(m.view(h.obj, h.owner))
	case "close":
		return m.close(p, o.Slot)
	case "fsync":
		// docs/atomic-writes.md rule 1: fsync(2) always commits, and returns its errors.
		if h := p.slots[o.Slot]; h.w != nil {
			return m.commit(h.w)
		}
		return "ok"
	case "kill":
		m.kill(p)
		return "ok"
	case "rename":
		return m.rename(p, o.Name, o.Name2)
	case "crash":
		m.crash()
		return "ok"
	}
	panic("model: unknown op " + o.Kind)
}

// modeFlags is the access mode and O_APPEND of an open in mode
// (model_worker_test.go modelOpenFlags): what File.sameOpen compares.
func modeFlags(mode string) string {
	switch mode {
	case "RDONLY":
		return "r"
	case "RDWR":
		return "rw"
	case "APPEND":
		return "wa"
	}
	return "w" // TRUNC, EXCL: O_WRONLY
}

// open: a read-only open shares the owner's write while it has
// uncommitted bytes (a process that reopens a file it writes sees its own
// bytes) and is otherwise a plain reader of the backing file as it is now
// (fusefs/file.go openOnce). A write open takes the file's lock for the
// owner in its mode (lockModeOf): EBUSY where another owner's hold excludes
// it, shared with the owner's own write otherwise (docs/atomic-writes.md "Atomic writes
// and the lock table"; locks.Table.AcquireMode).
func (m *model) open(p *mproc, slot, name, mode string) string {
	obj := m.names[name]
	if mode == "EXCL" {
		if obj != nil {
			return "err EEXIST"
		}
		m.nextID++
		obj = &mobj{id: m.nextID, ver: &mver{}, name: name, lastName: name}
		m.names[name] = obj
	}
	if obj == nil {
		return "err ENOENT"
	}
	m.nextID++
	f := modeFlags(mode)
	h := &mhandle{id: m.nextID, obj: obj, owner: p.owner, opener: p.id, descs: 1, flags: f, cur: f, heard: f, lock: lockModeOf(mode)}
	w := m.writes[wkey{obj, p.owner}]
	if mode == "RDONLY" {
		h.read = true
		if w != nil && w.temp != nil {
			h.w = w
			w.hs[h] = true
		} else {
			h.ver = obj.ver
		}
		p.slots[slot] = h
		return "ok"
	}
	if m.busy(p.owner, name, mode) {
		return "err EBUSY"
	}
	if w == nil {
		w = &mwrite{obj: obj, owner: p.owner, hs: map[*mhandle]bool{}, observed: obj.stamp, base: obj.ver}
		m.writes[wkey{obj, p.owner}] = w
	}
	h.w, h.write = w, true
	h.read = mode == "RDWR"
	h.appends = mode == "APPEND"
	h.openAppends = h.appends
	h.fresh = m.view(obj, p.owner) == ""
	w.hs[h] = true
	if mode == "TRUNC" {
		// Truncating starts the owner's content afresh on the file as it
		// is now (writeengine Write.Open: dropTemp, then ensureTemp's
		// catchUp): nothing of the version it began with survives, so
		// another owner's commit before this open is no conflict for it.
		w.temp = nil
		w.catchUp()
		empty := ""
		w.temp, w.overwrites = &empty, true
		h.truncates, h.writing = true, true
	}
	p.slots[slot] = h
	return "ok"
}

// ensureTemp gives w a temp, a copy of the file as it is now, and reports
// whether it made one.
func (w *mwrite) ensureTemp() bool {
	if w.temp != nil {
		return false
	}
	w.catchUp()
	c := w.obj.ver.content
	w.temp = &c
	return true
}

// write: an append (a handle opened O_APPEND without O_TRUNC) while the
// owner has nothing uncommitted goes into the file itself, at its end,
// seen at once by every reader, a descriptor opened before it included
// (docs/atomic-writes.md, "three modes"; fusefs/pending.go appendsInPlace). Any other
// write goes into the owner's temp: at the handle's offset, or for
// O_APPEND at the end of the owner's bytes ("an O_APPEND write goes to
// the end of the writer's bytes whatever size the kernel last heard of").
// O_APPEND is the descriptor's as it is at the write (F_SETFL changes
// it), which the daemon hears with the write. It returns the file
// position after the write.
func (m *model) write(h *mhandle, data string, off int) int {
	w := h.w
	h.writing = true // File.joinWriting, both ways
	h.heard = h.cur
	if h.appends && !h.truncates && w.temp == nil {
		w.catchUp()
		w.obj.ver.content += data
		w.obj.stamp++
		w.observed = w.obj.stamp // appendInPlace: the owner's own change
		return len(w.obj.ver.content)
	}
	if w.ensureTemp() {
		w.overwrites = false
	}
	w.overwrites = w.overwrites || !h.appends
	b := []byte(*w.temp)
	if h.appends {
		off = len(b)
	}
	for len(b) < off {
		b = append(b, 0)
	}
	end := off + len(data)
	if end > len(b) {
		b = append(b, make([]byte, end-len(b))...)
	}
	copy(b[off:], data)
	s := string(b)
	w.temp = &s
	return end
}

func (m *model) truncate(h *mhandle, size int) {
	w := h.w
	w.ensureTemp()
	w.overwrites, h.writing = true, true
	b := []byte(*w.temp)
	if size < len(b) {
		b = b[:size]
	}
	for len(b) < size {
		b = append(b, 0)
	}
	s := string(b)
	w.temp = &s
}

// commit makes the owner's bytes the file (a new backing file: readers
// holding the old one keep it) and returns the answer of the close or
// fsync that commits. A file whose name its own owner removed (renamed
// another over it) keeps them: "its bytes go with the old file and its
// close succeeds, as natively". A file changed since the owner observed it
// (another owner's append in place beside this owner's temp: docs/atomic-writes.md, "if
// another owner appends meanwhile, its commit finds the file changed and
// keeps a conflict copy (EBUSY), nothing is lost") is left as it is, the
// bytes kept as NAME.realm-conflict-* (commit.go conflict, rebase).
func (m *model) commit(w *mwrite) string {
	if w.temp == nil {
		return "ok"
	}
	obj := w.obj
	switch {
	case obj.name == "":
	case w.observed != obj.stamp:
		m.recovered = append(m.recovered, recovered{"conflict", obj.name, *w.temp})
		w.temp, w.observed, w.base = nil, obj.stamp, obj.ver
		return "err EBUSY"
	default:
		obj.ver = &mver{*w.temp}
		obj.stamp++
		w.observed, w.base = obj.stamp, obj.ver
		// What the writers wrote is the file now: none holds a close
		// back until it changes the file again (writeproto's Committed).
		for x := range w.hs {
			x.writing = false
		}
	}
	w.temp = nil
	return "ok"
}

// holdsOther reports whether p, closing a descriptor of h, holds another
// descriptor that may be of the same open: one of the file with h's
// access mode and O_APPEND (docs/atomic-writes.md rule 2: the daemon "counts the
// descriptors of the file with the open's access mode and O_APPEND …: a
// read descriptor held beside the rewrite … holds nothing back; a second
// write open of the file with the same flags in the same process defers
// the commit to the last of them"; File.sameOpen, procinfo.SameOpen). A dup
// of h is one (`cmd > f 2>&1`). The scan reads each descriptor's flags as
// they are now and compares them with h's as the daemon last heard them:
// after an F_SETFL with no WRITE since, a dup of h is not told as one.
// With no other open of the opener that the descriptor may be (one
// opened with h's access mode and the other O_APPEND), the scan counts any
// descriptor of h's access mode (writeHandle.sameOpen).
func (m *model) holdsOther(p *mproc, h *mhandle) bool {
	mode := strings.TrimSuffix(h.heard, "a")
	other := mode
	if other == h.heard {
		other += "a"
	}
	strict := false
	for x := range h.w.hs {
		if x != h && x.opener == h.opener && x.flags == other {
			strict = true
		}
	}
	for _, x := range p.slots {
		if x.obj == h.obj && (x.cur == h.heard || !strict && strings.TrimSuffix(x.cur, "a") == mode) {
			return true
		}
	}
	return false
}

// othersWriting reports whether a handle of w other than h is writing
// (rule 5: "A close commits nothing while another of those processes that
// has written (or truncated) the file since the last commit still holds
// it").
func (m *model) othersWriting(w *mwrite, h *mhandle) bool {
	for x := range w.hs {
		if x != h && x.writing {
			return true
		}
	}
	return false
}

// close: rule 2, the opener's close of its last descriptor of the open
// commits (synchronously: close-to-open) and returns the commit's errors,
// unless rule 5 holds it back; rule 4, any other process's close commits
// nothing; rule 7, what is left is committed at the owner's last RELEASE.
// A reader sharing the owner's write commits nothing at its close: it
// changed nothing (writeproto.Write.FlushStart), and the daemon cannot
// tell its descriptors from a plain reader's on another kernel inode.
// Rule 3 (a WRITE in flight) never holds here: each worker does
// one call at a time on one thread.
func (m *model) close(p *mproc, slot string) string {
	h := p.slots[slot]
	delete(p.slots, slot)
	h.descs--
	ans := m.flush(p, h)
	if h.descs == 0 {
		m.release(h)
	}
	return ans
}

// flush is what p's close of a descriptor of h does before any release.
func (m *model) flush(p *mproc, h *mhandle) string {
	ans := "ok"
	if h.w != nil && h.write && p.id == h.opener && !m.holdsOther(p, h) {
		// The scan finds no descriptor of this kind left in the opener,
		// so none of another open of the file by it with the same flags
		// (a sibling it closed while it held this one): they have left
		// too (writeproto.Write.Flush), though a child may hold them.
		for x := range h.w.hs {
			if x.opener == h.opener && x.flags == h.flags {
				x.writing = false
			}
		}
		h.writing = false
		if !m.othersWriting(h.w, h) {
			ans = m.commit(h.w)
		}
	}
	return ans
}

// release ends a handle whose last descriptor went; the owner's last one
// commits what is left (rule 7; its errors go to the audit log only) and
// frees the lock.
func (m *model) release(h *mhandle) {
	w := h.w
	if w == nil {
		return
	}
	h.writing = false
	if len(w.hs) == 1 && w.temp != nil {
		m.commit(w)
		m.async = true
	}
	delete(w.hs, h)
	if len(w.hs) == 0 {
		delete(m.writes, wkey{w.obj, w.owner})
	}
}

// kill: a process killed by SIGKILL. Rule 6: an opener killed before it
// closed the file has its bytes committed where that tears nothing old
// (it created the file or found it empty: fresh; or it only appended:
// O_APPEND, no O_TRUNC, and the temp holds only appends), and kept as
// NAME.realm-recovered-* otherwise, the file unchanged; its appends in
// place are in the file already. "When another process of the owner
// shares the open file, the bytes cannot be told apart: the owner's last
// close commits them": the code (pendingWrite.killed) applies the rule
// when the owner's write has exactly one handle, the killed opener's,
// whoever else holds descriptors of it, and otherwise leaves the bytes to
// the last close or release. So does the model. A child that only
// inherited the descriptor is not the opener: its death is a close by
// another process (rule 4), then a release (rule 7).
func (m *model) kill(p *mproc) {
	p.alive = false
	held := map[*mhandle]int{}
	for _, s := range p.slotIDs() {
		held[p.slots[s]]++
	}
	p.slots = map[string]*mhandle{}
	var hs []*mhandle
	for h, n := range held {
		h.descs -= n
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].id < hs[j].id })
	done := map[*mwrite]bool{}
	for _, h := range hs {
		w := h.w
		if w == nil || done[w] {
			continue
		}
		done[w] = true
		var opened []*mhandle
		for _, x := range hs {
			if x.w == w && x.opener == p.id && x.write {
				opened = append(opened, x)
			}
		}
		for _, x := range opened {
			x.writing = false
		}
		if len(opened) == 1 && w.writeHandles() == 1 && w.temp != nil {
			x := opened[0]
			if x.fresh || x.openAppends && !x.truncates && !w.overwrites {
				m.commit(w)
			} else {
				name := w.obj.name
				if name == "" {
					name = w.obj.lastName
				}
				m.recovered = append(m.recovered, recovered{"recovered", name, *w.temp})
				w.temp = nil
			}
		}
	}
	for _, h := range hs {
		if h.descs == 0 {
			m.release(h)
		}
	}
}

// rename: renaming over a file another owner holds (writing or appending)
// is EBUSY; the owner writing it may, and its write goes with the old
// file. The file renamed moves, its lock and every owner's write with it
// ("the lock follows the file"; FS.renamed).
func (m *model) rename(p *mproc, from, to string) string {
	src := m.names[from]
	if src == nil {
		return "err ENOENT"
	}
	if dst := m.names[to]; dst != nil {
		if m.heldByOther(p.owner, dst) {
			return "err EBUSY"
		}
		dst.name = ""
	}
	delete(m.names, from)
	m.names[to] = src
	src.name, src.lastName = to, to
	return "ok"
}

// crash: kill -9 of realmfs and a new mount. Every descriptor on the old
// mount is dead and every lock gone ("Locks live in memory; a restart
// frees them all"); BACKING holds each file's last committed content
// ("a crash, a kill -9 of realmfs … leaves each file its old or its new
// content"; the test never kills it inside a commit, so: the committed).
func (m *model) crash() {
	for _, p := range m.procs {
		p.slots = map[string]*mhandle{}
	}
	m.writes = map[wkey]*mwrite{}
}

// checkSlot is the descriptor a checker opens.
const checkSlot = "chk"

// check is what owner's checker (its process 0) must see of each name
// through a fresh read-only open, read, fstat, close and stat; the open
// and close are ops like any other (a close of a reader sharing the
// owner's write may commit it).
func (m *model) check(owner string) string {
	p := m.procs[owner+"0"]
	var out []string
	for _, n := range modelNames {
		obj := m.names[n]
		if obj == nil {
			out = append(out, "err ENOENT")
			continue
		}
		m.open(p, checkSlot, n, "RDONLY")
		v := m.view(obj, owner)
		// The close may commit, and fail: a conflict (checkPath stops
		// at the first error).
		if ans := m.close(p, checkSlot); ans != "ok" {
			out = append(out, "close "+ans)
			continue
		}
		out = append(out, fmt.Sprintf("%d %d %s", len(v), len(v), strconv.Quote(v)))
	}
	return strings.Join(out, "\t")
}

// committed is what BACKING must hold under each name ("" and false: no
// such file).
func (m *model) committed(name string) (string, bool) {
	obj := m.names[name]
	if obj == nil {
		return "", false
	}
	return obj.ver.content, true
}

// recoveredFor returns the contents of the copies of kind expected
// beside name, sorted.
func (m *model) recoveredFor(kind, name string) []string {
	var out []string
	for _, r := range m.recovered {
		if r.kind == kind && r.name == name {
			out = append(out, r.content)
		}
	}
	slices.Sort(out)
	return out
}
