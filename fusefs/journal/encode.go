package journal

import (
	"encoding/base64"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/realm-dev/realm/fusefs/journal/jsontime"
)

// appendLine appends l as encoding/json writes it (the fields in line's
// order, those omitempty leaves out left out, no HTML escaping) and a
// newline: by hand, since encoding/json's reflection was a tenth of the
// journal's CPU per record. decodeLine reads it back with encoding/json;
// TestEncodeMatchesJSON holds the two to the same bytes.
func appendLineJSON(b []byte, l *line) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, l.Seq, 10)
	if !l.Time.IsZero() {
		b = appendTime(append(b, `,"time":`...), l.Time)
	}
	b = appendStringField(b, "owner", l.Owner)
	b = appendStringField(b, "owner_start", l.OwnerAt)
	b = appendStringField(b, "session", l.Session)
	b = appendStringField(b, "op", string(l.Op))
	b = appendPathField(b, "path", l.Path)
	b = appendPathField(b, "to", l.To)
	if l.Kept {
		b = append(b, `,"kept":true`...)
	}
	if l.Before != nil {
		b = appendObject(append(b, `,"before":`...), l.Before)
	}
	if l.Replaced != nil {
		b = appendObject(append(b, `,"replaced":`...), l.Replaced)
	}
	if l.After != nil {
		b = append(b, `,"after":{"dev":`...)
		b = strconv.AppendUint(b, l.After.Dev, 10)
		b = append(b, `,"ino":`...)
		b = strconv.AppendUint(b, l.After.Ino, 10)
		b = append(b, '}')
	}
	if !l.Ctime.IsZero() {
		b = appendTime(append(b, `,"ctime":`...), l.Ctime)
	}
	b = appendStringField(b, "end", string(l.End))
	return append(b, "}\n"...)
}

// appendStringField appends ,"name":"s" where s is not empty.
func appendStringField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	b = append(append(append(b, `,"`...), name...), `":`...)
	return appendString(b, s)
}

// appendPathField appends ,"name":p, p as pathJSON writes it, where p is
// not empty.
func appendPathField(b []byte, name string, p pathJSON) []byte {
	if p == "" {
		return b
	}
	b = append(append(append(b, `,"`...), name...), `":`...)
	if utf8.ValidString(string(p)) {
		return appendString(b, string(p))
	}
	b = append(b, `{"bytes":"`...)
	b = base64.StdEncoding.AppendEncode(b, []byte(p))
	return append(b, `"}`...)
}

// appendObject appends o as an Object's JSON.
func appendObject(b []byte, o *Object) []byte {
	b = appendString(append(b, `{"type":`...), o.Type)
	b = strconv.AppendUint(append(b, `,"dev":`...), o.Dev, 10)
	b = strconv.AppendUint(append(b, `,"ino":`...), o.Ino, 10)
	b = strconv.AppendUint(append(b, `,"mode":`...), uint64(o.Mode), 10)
	b = strconv.AppendUint(append(b, `,"uid":`...), uint64(o.Uid), 10)
	b = strconv.AppendUint(append(b, `,"gid":`...), uint64(o.Gid), 10)
	b = strconv.AppendInt(append(b, `,"size":`...), o.Size, 10)
	b = appendTime(append(b, `,"mtime":`...), o.Mtime)
	b = appendTime(append(b, `,"atime":`...), o.Atime)
	if o.Gen != 0 {
		b = strconv.AppendUint(append(b, `,"gen":`...), o.Gen, 10)
	}
	return append(b, '}')
}

// appendTime appends t as time.Time's MarshalJSON does (package
// jsontime).
func appendTime(b []byte, t time.Time) []byte { return jsontime.Append(b, t) }

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it with SetEscapeHTML(false): quotes, backslashes, control
// characters, U+2028 and U+2029; a byte that is not UTF-8 is U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 { // as encoding/json: U+FFFD
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			start = i + size
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			start = i + size
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
