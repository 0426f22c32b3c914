package interceptor

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// ApplyPatches applies RFC 6902 operations to a copy of doc (decoded JSON)
// and returns the copy, as OpenShell's gateway does with a binding's
// patches: all or nothing. It implements add, remove, replace and test,
// which is what an interceptor of realm's kind returns; move and copy are
// refused. The fake OpenShell CLI and the tests use it to see what a
// gateway would make of realm's patches.
func ApplyPatches(doc any, patches []Patch) (any, error) {
	out, err := deepCopy(doc)
	if err != nil {
		return nil, err
	}
	for i, p := range patches {
		if out, err = applyOne(out, p); err != nil {
			return nil, fmt.Errorf("patch %d (%s %s): %w", i, p.Op, p.Path, err)
		}
	}
	return out, nil
}

func deepCopy(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

// pointer splits an RFC 6901 JSON pointer into its unescaped tokens.
func pointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

func applyOne(doc any, p Patch) (any, error) {
	toks, err := pointer(p.Path)
	if err != nil {
		return nil, err
	}
	val, err := deepCopy(p.Value)
	if err != nil {
		return nil, err
	}
	switch p.Op {
	case "add", "replace", "remove":
	case "test":
		got, err := get(doc, toks)
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(got, val) {
			return nil, fmt.Errorf("test failed")
		}
		return doc, nil
	default:
		return nil, fmt.Errorf("unsupported op %q", p.Op)
	}
	if len(toks) == 0 {
		if p.Op == "remove" {
			return nil, fmt.Errorf("cannot remove the whole document")
		}
		return val, nil
	}
	parent, err := get(doc, toks[:len(toks)-1])
	if err != nil {
		return nil, err
	}
	last := toks[len(toks)-1]
	switch c := parent.(type) {
	case map[string]any:
		_, exists := c[last]
		if (p.Op == "replace" || p.Op == "remove") && !exists {
			return nil, fmt.Errorf("no member %q", last)
		}
		if p.Op == "remove" {
			delete(c, last)
		} else {
			c[last] = val
		}
		return doc, nil
	case []any:
		var i int
		if last == "-" && p.Op == "add" {
			i = len(c)
		} else if i, err = index(last, len(c), p.Op == "add"); err != nil {
			return nil, err
		}
		var nc []any
		switch p.Op {
		case "add":
			nc = append(append(append([]any{}, c[:i]...), val), c[i:]...)
		case "replace":
			nc = append([]any{}, c...)
			nc[i] = val
		case "remove":
			nc = append(append([]any{}, c[:i]...), c[i+1:]...)
		}
		return set(doc, toks[:len(toks)-1], nc)
	default:
		return nil, fmt.Errorf("parent of %q is not an object or array", p.Path)
	}
}

func index(tok string, n int, end bool) (int, error) {
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || (tok != "0" && strings.HasPrefix(tok, "0")) {
		return 0, fmt.Errorf("bad array index %q", tok)
	}
	if i > n || (i == n && !end) {
		return 0, fmt.Errorf("array index %d out of range", i)
	}
	return i, nil
}

func get(doc any, toks []string) (any, error) {
	cur := doc
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("no member %q", t)
			}
			cur = v
		case []any:
			i, err := index(t, len(c), false)
			if err != nil {
				return nil, err
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("%q: not an object or array", t)
		}
	}
	return cur, nil
}

// set replaces the value at toks (an array that changed length).
func set(doc any, toks []string, v any) (any, error) {
	if len(toks) == 0 {
		return v, nil
	}
	parent, err := get(doc, toks[:len(toks)-1])
	if err != nil {
		return nil, err
	}
	last := toks[len(toks)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
	case []any:
		i, err := index(last, len(c), false)
		if err != nil {
			return nil, err
		}
		c[i] = v
	}
	return doc, nil
}
