package main

import "strings"

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
