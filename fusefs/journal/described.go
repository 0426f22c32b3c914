package journal

import (
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// A removal's kept/ entry says what it removed: the object an unlink or
// an rmdir takes from the workspace is renamed to
//
//	kept/SEQ~OWNER~OWNER_START~SESSION~PATH
//
// each field with "%", "/" and "~" escaped as %XX. The rename is then the
// change and its record at once: there is no moment at which the object
// has left its name and no record of it is durable, so the intent need
// not be on the device before the rename. Remove holds it with the ends
// (ends.go) and writes it with the next line: no pwrite of its own, no
// write-through, no flush (docs/PERFORMANCE.md: a fifth of the daemon's
// CPU on an rm -rf). A kill -9 of the daemon or a power loss that loses
// the held lines leaves the entry; Open rebuilds the intent from its name
// (what the name does not hold: the time, from the object's ctime, which
// the rename set; the object, from its stat, which the rename left alone)
// and ends it as any intent with no end, by what the path leads to.
//
// That holds where a rename is atomic across a crash: on a filesystem
// that journals its metadata (ext4 with a journal, as Options.Ordered
// says; XFS; btrfs), or where no durability is promised (without
// Options.Durable: a kill -9 loses no rename half made). Elsewhere (ext4
// with no journal, where a power loss can leave the object at neither
// name, or at both), and for a removal whose fields do not fit in a name
// (statfs's f_namelen), a removal takes the plain kept/SEQ, its intent
// appended and settled before the rename as every other change's.

// describedSep separates a described entry's fields.
const describedSep = '~'

// escapeField escapes what a field may not hold in a name.
func escapeField(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', '/', describedSep:
			b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}

// unescapeField is escapeField undone; false where s is not one's output.
func unescapeField(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b = append(b, byte(v))
		i += 2
	}
	return string(b), true
}

// describedEntry is kept/'s name for the removal rec (its Seq set) that
// says what it removed, and whether such names of rec fit in names of at
// most nameMax bytes (describedSuffix).
func describedEntry(rec *Record, nameMax int) (string, bool) {
	suffix, ok := describedSuffix(rec, nameMax)
	return keptEntry(rec.Seq) + suffix, ok
}

// describedSuffix is what follows the seq in the removal rec's described
// name, and whether the name fits in nameMax bytes whatever the seq.
func describedSuffix(rec *Record, nameMax int) (string, bool) {
	b := make([]byte, 0, 128)
	for _, f := range []string{rec.Owner, rec.OwnerStart, rec.Session, rec.Path} {
		b = escapeField(append(b, describedSep), f)
	}
	return string(b), len(b)+maxSeqDigits <= nameMax && rec.Path != ""
}

// nameMax is the longest name the filesystem of the directory dir takes
// (statfs's f_namelen: 255 on ext4, XFS and btrfs, less on some), at
// most NAME_MAX.
func nameMax(dir int) int {
	var st unix.Statfs_t
	if dirfd.Fstatfs(dir, &st) != nil || st.Namelen <= 0 {
		return unix.NAME_MAX
	}
	return int(min(st.Namelen, unix.NAME_MAX))
}

// maxSeqDigits is the length of the longest seq written out.
var maxSeqDigits = len(strconv.FormatUint(math.MaxUint64, 10))

// described is what a described entry's name says.
type described struct {
	name                          string
	seq                           uint64
	owner, ownerAt, session, path string
}

// parseDescribed reads a described entry's name.
func parseDescribed(name string) (described, bool) {
	f := strings.Split(name, string(describedSep))
	if len(f) != 5 {
		return described{}, false
	}
	seq, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || seq == 0 {
		return described{}, false
	}
	d := described{name: name, seq: seq}
	for i, p := range []*string{&d.owner, &d.ownerAt, &d.session, &d.path} {
		v, ok := unescapeField(f[i+1])
		if !ok {
			return described{}, false
		}
		*p = v
	}
	return d, d.path != ""
}

// keptSeq is the seq of kept/'s entry name, plain or described.
func keptSeq(name string) (uint64, bool) {
	digits, _, _ := strings.Cut(name, string(describedSep))
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil && seq > 0
}

// intent is the removal's intent d and the stat st of its entry say.
func (d *described) intent(st *unix.Stat_t) line {
	op := OpUnlink
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		op = OpRmdir
	}
	return line{
		Seq: d.seq, Time: time.Unix(st.Ctim.Unix()).UTC(),
		Owner: d.owner, OwnerAt: d.ownerAt, Session: d.session,
		Op: op, Path: pathJSON(d.path), Kept: true, Before: ObjectOf(st),
	}
}

// renamesAtomic reports whether the filesystem of dir journals its
// metadata whatever its options (XFS, btrfs): a rename on it is whole or
// not made after a crash. ext4's journal is optional, and read apart
// (Options.Ordered).
func renamesAtomic(dir int) bool {
	var st unix.Statfs_t
	if dirfd.Fstatfs(dir, &st) != nil {
		return false
	}
	return st.Type == unix.XFS_SUPER_MAGIC || st.Type == unix.BTRFS_SUPER_MAGIC
}
