package main

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/sandbox"
)

// auditColumn is one column of audit's table: its header, its width (0:
// the last column, as wide as its cell), whether it shortens a long cell
// from the left (keeping the tail, where a cgroup path names its scope)
// and its cell of a line.
type auditColumn struct {
	head  string
	width int
	tail  bool
	cell  func(p *auditPrinter, l auditLine) string
}

// auditColumns are the table's columns. The widths fit the longest value
// of the closed sets (codes, errnos, rule ids, comm's 15 bytes), so only
// owners, globs and names are ever shortened.
var auditColumns = []auditColumn{
	{"TIME", 20, false, func(_ *auditPrinter, l auditLine) string { return l.Time.UTC().Format(time.RFC3339) }},
	{"OP", 9, false, func(_ *auditPrinter, l auditLine) string { return l.Op }},
	{"CODE", 23, false, func(_ *auditPrinter, l auditLine) string { return dash(l.Code) }},
	{"ERRNO", 9, false, func(_ *auditPrinter, l auditLine) string { return dash(l.Errno) }},
	{"PID", 7, false, func(_ *auditPrinter, l auditLine) string { return strconv.FormatUint(uint64(l.Pid), 10) }},
	{"UID", 10, false, func(_ *auditPrinter, l auditLine) string { return strconv.FormatUint(uint64(l.Uid), 10) }},
	{"PROGRAM", 15, false, func(_ *auditPrinter, l auditLine) string { return program(l) }},
	{"OWNER", 24, true, func(_ *auditPrinter, l auditLine) string { return dash(l.Owner) }},
	{"SESSION", 12, false, func(p *auditPrinter, l auditLine) string { return p.session(l) }},
	{"RULE", 22, false, func(_ *auditPrinter, l auditLine) string { return dash(l.Rule) }},
	{"PATH", 0, false, func(_ *auditPrinter, l auditLine) string {
		if l.Repeat > 1 {
			return fmt.Sprintf("%s (x%d)", l.Path, l.Repeat)
		}
		return l.Path
	}},
}

// exeColumn is the column -o wide adds after PROGRAM.
var exeColumn = auditColumn{"EXE", 24, false, func(_ *auditPrinter, l auditLine) string { return dash(l.Exe) }}

// program names the calling program: its comm, else its exe's base name.
func program(l auditLine) string {
	if l.Comm != "" {
		return l.Comm
	}
	if l.Exe != "" {
		return filepath.Base(l.Exe)
	}
	return "-"
}

// auditPrinter prints audit lines as a table of fixed-width columns, as
// the log's own JSON lines, or as one YAML document per line. A tabwriter would size the columns of each
// flush by its own rows, so the rows --follow prints would not line up
// with the header.
type auditPrinter struct {
	json bool
	yaml bool
	wide bool
	w    io.Writer
	cols []auditColumn
	// sessions maps a container id to the session whose sandbox it is,
	// reloaded from the state dir once per batch in which an unknown id
	// appears (a session created while following).
	sessions map[string]string
	reload   func() map[string]string
	reloaded bool
}

// newAuditPrinter is the printer of c's output format, its sessions read
// from c's state dir.
func newAuditPrinter(c *cli) *auditPrinter {
	p := &auditPrinter{json: c.out.json(), yaml: c.out.format == "yaml", wide: c.out.wide(), w: c.out.w, cols: auditColumns}
	if p.wide {
		p.cols = append(append(append([]auditColumn{}, auditColumns[:7]...), exeColumn), auditColumns[7:]...)
	}
	p.reload = func() map[string]string { return sessionsByContainer(c.g.stateDir) }
	p.sessions = p.reload()
	p.reloaded = true
	return p
}

// sessionsByContainer maps the container id of every session of the state
// dir to the session's name, or its id when it has none.
func sessionsByContainer(stateDir string) map[string]string {
	m := map[string]string{}
	recs, _ := sandbox.NewStore(stateDir).All() // no records: no SESSION, not an error
	for _, r := range recs {
		if r.ContainerID != nil {
			m[*r.ContainerID] = cmp.Or(r.Name, r.ID)
		}
	}
	return m
}

// session is the SESSION cell of l.
func (p *auditPrinter) session(l auditLine) string {
	if l.Container == "" {
		return "-"
	}
	s, ok := p.sessions[l.Container]
	if !ok && !p.reloaded && p.reload != nil {
		p.sessions, p.reloaded = p.reload(), true
		s, ok = p.sessions[l.Container]
	}
	if !ok {
		return "-"
	}
	return s
}

func (p *auditPrinter) header() {
	if p.json || p.yaml {
		return
	}
	heads := make([]string, len(p.cols))
	for i, c := range p.cols {
		heads[i] = c.head
	}
	p.row(heads)
}

func (p *auditPrinter) line(l auditLine) {
	if p.json {
		p.w.Write(l.raw)
		return
	}
	if p.yaml {
		p.yamlDoc(l.raw)
		return
	}
	cells := make([]string, len(p.cols))
	for i, c := range p.cols {
		cells[i] = c.cell(p, l)
	}
	p.row(cells)
}

// yamlDoc writes one line of the log (JSON, which is YAML) as a YAML
// document in block style, its keys in the line's order.
func (p *auditPrinter) yamlDoc(raw []byte) {
	var n yaml.Node
	if yaml.Unmarshal(raw, &n) != nil {
		return
	}
	blockStyle(&n)
	b, err := yaml.Marshal(&n)
	if err != nil {
		return
	}
	io.WriteString(p.w, "---\n")
	p.w.Write(b)
}

// row writes cells in the columns' widths, two spaces apart.
func (p *auditPrinter) row(cells []string) {
	var b strings.Builder
	for i, c := range p.cols {
		cell := audit.Printable(cells[i])
		if c.width == 0 {
			b.WriteString(cell)
			break
		}
		if !p.wide {
			cell = audit.Fit(cell, c.width, c.tail)
		}
		b.WriteString(cell)
		if n := utf8.RuneCountInString(cell); n < c.width {
			b.WriteString(strings.Repeat(" ", c.width-n))
		}
		b.WriteString("  ")
	}
	b.WriteByte('\n')
	io.WriteString(p.w, b.String())
}

// flush ends a batch: the next unknown container may reload the sessions.
func (p *auditPrinter) flush() { p.reloaded = false }
