// Package jsontime writes a time as encoding/json does, faster: a
// journal record holds three or four (its own, and its object's mtime,
// atime and ctime), and time.Time's AppendFormat, which reads its layout
// at each call, took a tenth of a removal's record (docs/PERFORMANCE.md).
// A time of offset zero (a record's, and every stat's on a host kept in
// UTC) is written by hand; any other by AppendFormat. It is pure.
package jsontime

import "time"

// Append appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted).
func Append(b []byte, t time.Time) []byte {
	b = append(b, '"')
	y, mo, d := t.Date()
	if _, off := t.Zone(); off != 0 || y < 0 || y > 9999 {
		return append(t.AppendFormat(b, time.RFC3339Nano), '"')
	}
	h, mi, s := t.Clock()
	b = appendDigits(b, y, 4)
	b = appendDigits(append(b, '-'), int(mo), 2)
	b = appendDigits(append(b, '-'), d, 2)
	b = appendDigits(append(b, 'T'), h, 2)
	b = appendDigits(append(b, ':'), mi, 2)
	b = appendDigits(append(b, ':'), s, 2)
	if ns := t.Nanosecond(); ns != 0 {
		n := len(b)
		b = appendDigits(append(b, '.'), ns, 9)
		for b[len(b)-1] == '0' && len(b) > n {
			b = b[:len(b)-1]
		}
	}
	return append(b, 'Z', '"')
}

// appendDigits appends v, not negative, in width decimal digits, zeros
// first.
func appendDigits(b []byte, v, width int) []byte {
	var d [9]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:width]...)
}
