// Package keptname names the entries of a journal's kept/: kept/SEQ for
// a version a change replaced, and for what a removal took from the
// workspace a name that holds its record, SEQ~OWNER~OWNER_START~SESSION~PATH
// (fusefs/journal, described.go), each field with "%", "/" and "~"
// escaped as %XX. It is pure: no system call.
package keptname

import (
	"math"
	"strconv"
	"strings"
)

// Sep separates a described entry's fields.
const Sep = '~'

// Fields are what a described entry's name holds beside its seq.
type Fields struct {
	Owner, OwnerStart, Session, Path string
}

// Entry is what a described entry's name says.
type Entry struct {
	Name string
	Seq  uint64
	Fields
}

// Plain is kept/'s name for change seq's kept version.
func Plain(seq uint64) string { return strconv.FormatUint(seq, 10) }

// Name is the described name of the removal seq of f, and whether such
// names of f fit in nameMax bytes (Fits).
func Name(seq uint64, f Fields, nameMax int) (string, bool) {
	return string(AppendName(nil, seq, f)), Fits(f, nameMax)
}

// AppendName appends the described name of the removal seq of f to b: a
// removal makes its entry's path in one buffer with it.
func AppendName(b []byte, seq uint64, f Fields) []byte {
	b = strconv.AppendUint(b, seq, 10)
	for _, s := range [...]string{f.Owner, f.OwnerStart, f.Session, f.Path} {
		b = escape(append(b, Sep), s)
	}
	return b
}

// Fits reports whether the described names of f fit in nameMax bytes
// whatever their seq (f.Path set), without making one.
func Fits(f Fields, nameMax int) bool {
	n := maxSeqDigits
	for _, s := range [...]string{f.Owner, f.OwnerStart, f.Session, f.Path} {
		n += 1 + len(s) + 2*escapes(s)
	}
	return n <= nameMax && f.Path != ""
}

// maxSeqDigits is the length of the longest seq written out.
var maxSeqDigits = len(strconv.FormatUint(math.MaxUint64, 10))

// Parse reads a described name.
func Parse(name string) (Entry, bool) {
	parts := strings.Split(name, string(Sep))
	if len(parts) != 5 {
		return Entry{}, false
	}
	seq, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil || seq == 0 {
		return Entry{}, false
	}
	e := Entry{Name: name, Seq: seq}
	for i, p := range []*string{&e.Owner, &e.OwnerStart, &e.Session, &e.Path} {
		v, ok := unescape(parts[i+1])
		if !ok {
			return Entry{}, false
		}
		*p = v
	}
	return e, e.Path != ""
}

// Seq is the seq of an entry's name, plain or described.
func Seq(name string) (uint64, bool) {
	digits, _, _ := strings.Cut(name, string(Sep))
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil && seq > 0
}

// escapes counts the bytes of s that escape writes as three.
func escapes(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c == '/' || c == Sep {
			n++
		}
	}
	return n
}

// escape appends s with what a field may not hold in a name escaped.
func escape(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', '/', Sep:
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}

// unescape is escape undone; false where s is not one's output.
func unescape(s string) (string, bool) {
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
