package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The man page is written by hand but for the parts between
// `.\" BEGIN GENERATED NAME` and `.\" END GENERATED NAME`: the mount's flags
// (flags), the -o options (mount-options) and realmfs audit's flags
// (audit-flags).

// genManParts is man with its generated parts made anew.
func genManParts(man string, cmds []cmdDoc) (string, error) {
	var audit cmdDoc
	for _, c := range cmds {
		if c.name == "audit" {
			audit = c
		}
	}
	parts := map[string]string{
		"flags":         manFlags(cmds[0].flags),
		"mount-options": manOptions(),
		"audit-flags":   manFlags(audit.flags),
	}
	for name, body := range parts {
		begin, end := `.\" BEGIN GENERATED `+name+"\n", `.\" END GENERATED `+name+"\n"
		i, j := strings.Index(man, begin), strings.Index(man, end)
		if i < 0 || j < i {
			return "", fmt.Errorf("dist/man/realmfs.1 lacks the markers %q and %q", strings.TrimSpace(begin), strings.TrimSpace(end))
		}
		man = man[:i+len(begin)] + body + man[j:]
	}
	return man, nil
}

// roff escapes s for a line of running text: backslashes and hyphens, and
// a line that would start with a control character.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`, "…", "...").Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// sentence is a usage as the man page's prose: capitalised, with a stop.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// manFlags is one .TP entry per flag.
func manFlags(flags []flagDoc) string {
	var b strings.Builder
	for _, d := range flags {
		names := make([]string, 0, 2)
		for _, n := range flagNames(d) {
			names = append(names, roff(n))
		}
		head := ".BR " + strings.Join(names, ` ", " `)
		if d.short == "" {
			head = ".B " + names[0]
		}
		switch d.value {
		case "":
		case "strings":
			head = ".BR " + strings.Join(names, ` ", " `) + ` " \fIopt\fR[,\fIopt\fR...]"`
		default:
			if d.short == "" {
				head = ".BR " + names[0]
			}
			head += ` " \fI` + roff(d.value) + `\fR"`
		}
		fmt.Fprintf(&b, ".TP\n%s\n%s\n", head, roff(sentence(d.usage)))
	}
	return b.String()
}

// manOptions is one .TP entry per -o option of the help's table.
func manOptions() string {
	var b strings.Builder
	for _, d := range optionDocs() {
		head := ".B " + roff(d.key)
		if d.value != "" {
			if _, free := d.choices(); free {
				head = ".BI " + roff(d.key) + "= " + roff(d.value)
			} else {
				head = ".BR " + roff(d.key) + "= " + roff(d.value)
			}
		}
		fmt.Fprintf(&b, ".TP\n%s\n%s\n", head, roff(sentence(d.desc)))
	}
	return b.String()
}
