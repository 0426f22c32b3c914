package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/realm-dev/realm/errcode"
)

// Filter is realmfs audit's selection of lines.
type Filter struct {
	Code  errcode.Code
	Owner string
	Since time.Time
}

// match reports whether ev passes the filter. A rotation's first line
// (op "rotate") is not a refusal and never passes.
func (f Filter) Match(ev Event) bool {
	return ev.Op != "rotate" && (f.Code == "" || ev.Code == f.Code) &&
		(f.Owner == "" || ev.Owner == f.Owner) && (f.Since.IsZero() || !ev.Time.Before(f.Since))
}

// auditColumn is one column of the table: its header, its width (0: the
// last, as wide as its cell), whether a long cell keeps its tail (an
// owner's cgroup path ends in its scope) and its cell of a line.
type auditColumn struct {
	head  string
	width int
	tail  bool
	cell  func(ev Event) string
}

// auditColumns are the table's columns. Fixed widths, fitting the longest
// value of the closed sets (codes, errnos, rule ids, comm's 15 bytes), so
// that rows printed under -f line up with the header printed first.
var auditColumns = []auditColumn{
	{"TIME", 20, false, func(ev Event) string { return ev.Time.UTC().Format(time.RFC3339) }},
	{"OP", 10, false, func(ev Event) string { return ev.Op }},
	{"CODE", 23, false, func(ev Event) string { return dash(string(ev.Code)) }},
	{"ERRNO", 10, false, func(ev Event) string { return dash(ev.Errno) }},
	{"PROGRAM", 15, false, programOf},
	{"OWNER", 24, true, func(ev Event) string { return dash(ev.Owner) }},
	{"RULE", 22, false, func(ev Event) string { return dash(ev.Rule) }},
	{"PATH", 0, false, pathCell},
}

// programOf names the calling program: its comm, else its exe's name.
func programOf(ev Event) string {
	switch {
	case ev.Comm != "":
		return ev.Comm
	case ev.Exe != "":
		return filepath.Base(ev.Exe)
	}
	return "-"
}

// pathCell is the path, with how many refusals a repeat line stands for
// and, for a lock conflict, who holds the lock (its owner, and the pid and
// program of its open that took it).
func pathCell(ev Event) string {
	s := ev.Path
	if ev.Repeat > 1 {
		s += fmt.Sprintf(" (x%d)", ev.Repeat)
	}
	if ev.Holder != "" {
		s += " (held by " + ev.Holder
		if ev.HolderPid != 0 {
			s += fmt.Sprintf(", pid %d %s", ev.HolderPid, dash(ev.HolderComm))
		}
		s += ")"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Printer prints lines as the table or as the log's own JSON lines.
type Printer struct {
	w    io.Writer
	json bool
}

func NewPrinter(w io.Writer, json bool) *Printer {
	return &Printer{w: w, json: json}
}

// header prints the table's header (none for JSON lines).
func (p *Printer) Header() {
	if p.json {
		return
	}
	heads := make([]string, len(auditColumns))
	for i, c := range auditColumns {
		heads[i] = c.head
	}
	p.row(heads)
}

// print prints one line of the log if it passes f; a line that is not an
// audit line (a partial write, another file) is skipped.
func (p *Printer) Print(raw []byte, f Filter) {
	ev, ok := ParseLine(raw)
	if !ok || !f.Match(ev) {
		return
	}
	p.event(raw, ev)
}

// event prints ev, whose line in the log is raw.
func (p *Printer) event(raw []byte, ev Event) {
	if p.json {
		p.w.Write(append(bytes.TrimRight(raw, "\n"), '\n'))
		return
	}
	cells := make([]string, len(auditColumns))
	for i, c := range auditColumns {
		cells[i] = c.cell(ev)
	}
	p.row(cells)
}

// ParseLine reads one line of the log.
func ParseLine(raw []byte) (Event, bool) {
	var ev Event
	if json.Unmarshal(raw, &ev) != nil || ev.Op == "" {
		return ev, false
	}
	return ev, true
}

// row writes cells in the columns' widths, two spaces apart.
func (p *Printer) row(cells []string) {
	var b strings.Builder
	for i, c := range auditColumns {
		cell := Printable(cells[i])
		if c.width == 0 {
			b.WriteString(cell)
			break
		}
		cell = Fit(cell, c.width, c.tail)
		b.WriteString(cell)
		b.WriteString(strings.Repeat(" ", c.width-utf8.RuneCountInString(cell)+2))
	}
	b.WriteByte('\n')
	io.WriteString(p.w, b.String())
}

// Printable is s as a table's cell shows it (realmfs audit's, realmctl
// audit's): as it is when it is valid UTF-8 and every rune printable
// (strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the
// ASCII space), else Go-quoted. A path and a program's name are the
// caller's to choose: a newline would forge a row of the table, an escape
// sequence or a bidi override would drive or fool the reader's terminal.
func Printable(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Fit shortens s to width runes with "…", keeping its head, or its tail
// (a table's cell: realmfs audit's, realmctl audit's).
func Fit(s string, width int, tail bool) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	if tail {
		return "…" + string(r[len(r)-width+1:])
	}
	return string(r[:width-1]) + "…"
}

// Tail prints with p the last lines lines of r that pass f (all of them
// for -1, none for 0) and returns what r held after its last newline: a
// line being written, which Follow completes.
func Tail(r io.Reader, f Filter, lines int, p *Printer) ([]byte, error) {
	type kept struct {
		raw []byte
		ev  Event
	}
	var tail []kept
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return nil, err
			}
			for _, k := range tail {
				p.event(k.raw, k.ev)
			}
			return line, nil
		}
		ev, ok := ParseLine(line)
		if !ok || !f.Match(ev) || lines == 0 {
			continue
		}
		tail = append(tail, kept{line, ev})
		if lines > 0 && len(tail) > lines {
			tail = tail[1:]
		}
	}
}
