package journal

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Op is the operation a change made.
type Op string

// The operations a record names (docs/JOURNAL.md, Records).
const (
	OpCreate   Op = "create"   // a new file (path; after: the file, where known)
	OpRewrite  Op = "rewrite"  // a file replaced by a commit's rename (before: the old file, kept by link; after: the new one)
	OpAppend   Op = "append"   // bytes appended in place (before: its size)
	OpTruncate Op = "truncate" // a file's size changed (in place: before its size; by a commit's rename: as a rewrite)
	OpUnlink   Op = "unlink"   // a name removed (before: its object, kept by rename: Journal.Remove)
	OpRmdir    Op = "rmdir"    // an empty directory removed (as unlink)
	OpMkdir    Op = "mkdir"    // a directory made
	OpRename   Op = "rename"   // path renamed to To (before: the object moved; replaced: what To named, kept by link)
	OpLink     Op = "link"     // a hard link To made to path's object (before: that object)
	OpSymlink  Op = "symlink"  // a symlink made at path
	OpMknod    Op = "mknod"    // a fifo or a socket made at path
	OpChmod    Op = "chmod"    // mode changed (before: the old one)
	OpChown    Op = "chown"    // owner changed (before: the old one)
	OpUtimens  Op = "utimens"  // times changed (before: the old ones)
	// OpInPlace: a coordinated file (SQLite's) opened for writing in place
	// (before: its stat at the open): what its writers change is not kept,
	// and undo cannot put it back; the program's own journal orders it.
	OpInPlace Op = "inplace"
)

// ops are the operations Begin accepts.
var ops = map[Op]bool{
	OpCreate: true, OpRewrite: true, OpAppend: true, OpTruncate: true,
	OpUnlink: true, OpRmdir: true, OpMkdir: true, OpRename: true,
	OpLink: true, OpSymlink: true, OpMknod: true,
	OpChmod: true, OpChown: true, OpUtimens: true, OpInPlace: true,
}

// End is how a change ended: the end record's "end".
type End string

// The ends of a change; an intent with none is in flight (or, after a
// crash, resolved by Open's recovery).
const (
	Done    End = "done"
	Aborted End = "aborted"
)

// ID is an object's identity: what recovery compares the names of a
// record to.
type ID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// Object is what undoing a change needs of the object it changed or
// removed: its identity and metadata.
type Object struct {
	Type  string    `json:"type"` // file, dir, symlink, fifo, socket, char, block
	Dev   uint64    `json:"dev"`
	Ino   uint64    `json:"ino"`
	Mode  uint32    `json:"mode"` // st_mode, the type's bits included
	Uid   uint32    `json:"uid"`
	Gid   uint32    `json:"gid"`
	Size  int64     `json:"size"`
	Mtime time.Time `json:"mtime"`
	Atime time.Time `json:"atime"`
	// Gen tells the object from a later one its inode number was freed
	// to: dirfd.Statx's generation, of its birth time (0: not known).
	// Undo of a change made in place checks it where the record has it.
	Gen uint64 `json:"gen,omitempty"`
	// Ctime is the stat's, for undo's checks: never written.
	Ctime time.Time `json:"-"`
}

// ID is the object's identity.
func (o *Object) ID() ID { return ID{o.Dev, o.Ino} }

// ObjectOf is the Object a stat describes.
func ObjectOf(st *unix.Stat_t) *Object {
	return &Object{
		Type: typeOf(st.Mode), Dev: st.Dev, Ino: st.Ino, Mode: st.Mode,
		Uid: st.Uid, Gid: st.Gid, Size: st.Size,
		Mtime: time.Unix(st.Mtim.Unix()).UTC(),
		Atime: time.Unix(st.Atim.Unix()).UTC(),
		Ctime: time.Unix(st.Ctim.Unix()).UTC(),
	}
}

// typeOf names the type of a st_mode.
func typeOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "char"
	case unix.S_IFBLK:
		return "block"
	}
	return "unknown"
}

// MakeOp is the op that makes an object of type typ (Object.Type): what
// undo restores a removed object as, and what recovery takes a later
// record's object for.
func MakeOp(typ string) Op {
	switch typ {
	case "file":
		return OpCreate
	case "dir":
		return OpMkdir
	case "symlink":
		return OpSymlink
	}
	return OpMknod
}

// Record is one change: its intent and, once known, its end. Begin sets
// Seq, Time and Kept; the producer the rest. Records returns intents with
// their End (and After, where the end carried it) filled in.
type Record struct {
	Seq   uint64
	Time  time.Time
	Owner string // as the audit log writes it: cgroup:…, session:N, pid:N
	// OwnerStart is the owner's incarnation (procinfo.Incarnation: of
	// session:N and pid:N the start of the leader or process, "TICKS-BOOT"),
	// which tells apart the owners one pid named over time; "" where not
	// known (a cgroup owner, a leader gone, a record older than it).
	OwnerStart string
	Session    string // the realmctl session, where there is one
	Op         Op
	Path       string // workspace-relative
	To         string // a rename's or a link's new name
	// Kept: kept/<Seq> holds the version the change replaced or removed.
	Kept bool
	// Before is the object the change changes, moves or removes (nil: the
	// name was absent); Replaced, the one a rename replaced at To.
	Before, Replaced *Object
	// After is the identity the change leaves at its name (a rename's: To
	// holds Before), where known before it is made (a commit's temp), or
	// where the end said it.
	After *ID
	// AfterCtime is the object's ctime right after a change of its
	// metadata (chmod, chown, utimens), where the end said it: undo puts
	// the metadata back only on the object unchanged since (ctime is the
	// kernel's, set at every change of an inode and at its making).
	AfterCtime time.Time
	End        End
}

// ended fills in what r's end l says: the end, After where the intent
// did not know it, the ctime after a change of metadata, and the object a
// removal removed where it was not the one its intent named (Remove).
func (r *Record) ended(l *line) {
	r.End = l.End
	if r.After == nil {
		r.After = l.After
	}
	r.AfterCtime = l.Ctime
	if l.Before != nil {
		r.Before = l.Before
	}
}

// line is a record as one line of a segment: an intent (Op set) or an end
// (End set). Paths are pathJSON, so that a name that is not UTF-8 comes
// back byte for byte.
type line struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time,omitzero"`
	Owner    string    `json:"owner,omitempty"`
	OwnerAt  string    `json:"owner_start,omitempty"`
	Session  string    `json:"session,omitempty"`
	Op       Op        `json:"op,omitempty"`
	Path     pathJSON  `json:"path,omitempty"`
	To       pathJSON  `json:"to,omitempty"`
	Kept     bool      `json:"kept,omitempty"`
	Before   *Object   `json:"before,omitempty"`
	Replaced *Object   `json:"replaced,omitempty"`
	After    *ID       `json:"after,omitempty"`
	Ctime    time.Time `json:"ctime,omitzero"`
	End      End       `json:"end,omitempty"`
}

// intentLine is rec's intent as a line.
func intentLine(rec *Record) line {
	return line{
		Seq: rec.Seq, Time: rec.Time, Owner: rec.Owner, OwnerAt: rec.OwnerStart, Session: rec.Session,
		Op: rec.Op, Path: pathJSON(rec.Path), To: pathJSON(rec.To), Kept: rec.Kept,
		Before: rec.Before, Replaced: rec.Replaced, After: rec.After,
	}
}

// record is the intent l holds.
func (l *line) record() Record {
	return Record{
		Seq: l.Seq, Time: l.Time, Owner: l.Owner, OwnerStart: l.OwnerAt, Session: l.Session,
		Op: l.Op, Path: string(l.Path), To: string(l.To), Kept: l.Kept,
		Before: l.Before, Replaced: l.Replaced, After: l.After,
	}
}

// encode is l as a line of a segment, its newline included
// (appendLineJSON).
func (l *line) encode() ([]byte, error) {
	return appendLineJSON(make([]byte, 0, 512), l), nil
}

// errNotRecord: a line that is JSON but neither an intent nor an end.
var errNotRecord = errors.New("not a record")

// decodeLine parses one line of a segment (without its newline).
func decodeLine(b []byte) (line, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return l, err
	}
	if l.Seq == 0 || (l.Op == "") == (l.End == "") {
		return l, errNotRecord
	}
	return l, nil
}

// pathJSON is a path in a record: a JSON string where it is UTF-8 (as
// nearly every path is), else {"bytes": base64 of its bytes}, since
// encoding/json would replace each invalid byte with U+FFFD.
type pathJSON string

func (p pathJSON) MarshalJSON() ([]byte, error) {
	var v any = string(p)
	if !utf8.ValidString(string(p)) {
		v = struct {
			Bytes string `json:"bytes"`
		}{base64.StdEncoding.EncodeToString([]byte(p))}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // a path's <, > and & as they are
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func (p *pathJSON) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var v struct {
			Bytes string `json:"bytes"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		raw, err := base64.StdEncoding.DecodeString(v.Bytes)
		if err != nil {
			return fmt.Errorf("path bytes: %w", err)
		}
		*p = pathJSON(raw)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*p = pathJSON(s)
	return nil
}
