package main

import (
	"errors"
	"fmt"
	"strings"
)

// errUnknownOption is wrapped by parseMountOptions for a usage error: an
// option it does not know, or a known one given a value it cannot take.
var errUnknownOption = errors.New("unknown mount option")

// optionValueError is a known option given a value it cannot take: the
// message names the value's problem, not the option as unknown (sshfs
// and bindfs users read "unknown" as a typo in the name).
type optionValueError struct {
	opt  string // as given: key=value, or key
	want string // what would do
}

func (e *optionValueError) Error() string { return fmt.Sprintf("-o %s: %s", e.opt, e.want) }

// Unwrap makes a value error a usage error about -o, as an unknown option is.
func (e *optionValueError) Unwrap() error { return errUnknownOption }

// badValue is the error of option key given val.
func badValue(key, val, want string) error {
	return &optionValueError{opt: key + "=" + val, want: want}
}

// misused is the error of an option parseMountOptions has no case for: a
// known key in the wrong form (a value where it takes none, none where it
// needs one), or an unknown key. The known keys are the help's table.
func misused(key, val string, hasVal bool) error {
	doc, known := lookupOptionDoc(key)
	switch {
	case !known:
		opt := key
		if hasVal {
			opt += "=" + val
		}
		return fmt.Errorf("-o %s: %w (see realmfs --help)", opt, errUnknownOption)
	case doc.value == "":
		return &optionValueError{opt: key + "=" + val, want: key + " takes no value"}
	case hasVal: // an empty value
		return &optionValueError{opt: key + "=", want: "want " + key + "=" + doc.value}
	}
	return &optionValueError{opt: key, want: "want " + key + "=" + doc.value}
}

// optionDoc is one option of the help's table (optionsText): its key,
// the form of its value ("" none; "on|off" a choice; "FILE" free) and
// what the help says of it.
type optionDoc struct {
	key, value string
	desc       string
}

// choices are the literal values of an option (on|off; none of
// state_dir=DIR|none), and free whether it also takes a value of the
// user's (a FILE, a number: the upper-case parts).
func (d optionDoc) choices() (lits []string, free bool) {
	if d.value == "" {
		return nil, false
	}
	for _, v := range strings.Split(d.value, "|") {
		if strings.ToUpper(v) == v {
			free = true
		} else {
			lits = append(lits, v)
		}
	}
	return lits, free
}

// optionDocs reads the options of the help's table: each line whose first
// word, two spaces in, is an option (lower case, perhaps key=VALUE). The
// table is the one place the options are listed for people, so the
// completions, the man page and the value errors read it rather than a
// copy that would fall behind; TestOptionDocsMatchParser keeps it and the
// parser in step.
func optionDocs() []optionDoc {
	var docs []optionDoc
	cur := -1 // the entry continuation lines belong to
	for _, line := range strings.Split(optionsText, "\n") {
		if strings.HasPrefix(line, "   ") && cur >= 0 {
			docs[cur].desc = strings.TrimSpace(docs[cur].desc + " " + strings.TrimSpace(line))
			continue
		}
		cur = -1
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		word, desc, _ := strings.Cut(strings.TrimSpace(line), " ")
		key, value, _ := strings.Cut(word, "=")
		if key == "" || strings.ToLower(key) != key || strings.ContainsAny(key, "(),.*") {
			continue
		}
		docs = append(docs, optionDoc{key: key, value: value, desc: strings.TrimSpace(desc)})
		cur = len(docs) - 1
	}
	return docs
}

// lookupOptionDoc is the help's entry of key.
func lookupOptionDoc(key string) (optionDoc, bool) {
	for _, d := range optionDocs() {
		if d.key == key {
			return d, true
		}
	}
	return optionDoc{}, false
}
