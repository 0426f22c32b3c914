package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/errcode"
)

// Parse parses and validates a policy file. name is used only in error
// messages ("policy.yaml:4: credentials.deny[1]: bad glob ...").
//
// The YAML is walked as a node tree rather than decoded into structs so that
// every error can carry the line of the offending node, and so that unknown
// keys, duplicate keys and aliases are refused instead of silently taken.
func Parse(name string, data []byte) (*Policy, error) {
	ps := &parser{name: name}
	if len(data) > maxPolicySize {
		return nil, errcode.New(errcode.SchemaInvalid, "%s: file larger than %d bytes", name, maxPolicySize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ps.errf(nil, "", "empty policy (want at least \"version: 1\")")
		}
		return nil, ps.syntax(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, ps.syntax(err)
	default:
		return nil, ps.errf(&extra, "", "more than one YAML document")
	}
	if len(doc.Content) != 1 {
		return nil, ps.errf(&doc, "", "empty policy (want at least \"version: 1\")")
	}
	if isNull(doc.Content[0]) {
		return nil, ps.errf(doc.Content[0], "", "empty policy (want at least \"version: 1\")")
	}
	return ps.policy(doc.Content[0])
}

// parser carries the file name into every error.
type parser struct {
	name string
}

func (ps *parser) errf(n *yaml.Node, field, format string, args ...any) error {
	return errcode.New(errcode.SchemaInvalid, "%s%s", ps.where(n, field), fmt.Sprintf(format, args...))
}

func (ps *parser) wrap(n *yaml.Node, field string, err error) error {
	w := ps.where(n, field)
	return errcode.Wrap(errcode.SchemaInvalid, err, "%s", strings.TrimSuffix(w, ": "))
}

// where formats "file:line: field: ".
func (ps *parser) where(n *yaml.Node, field string) string {
	line := 1
	if n != nil && n.Line > 0 {
		line = n.Line
	}
	s := fmt.Sprintf("%s:%d: ", ps.name, line)
	if field != "" {
		s += field + ": "
	}
	return s
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntax turns a YAML library error into one that names the file and line.
func (ps *parser) syntax(err error) error {
	msg := err.Error()
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if strings.Contains(msg, "anchor") || strings.Contains(msg, "alphabetic or numeric") {
		msg += " (quote globs that start with *)"
	}
	// The library's error is text only; keep its words without its prefix.
	return errcode.Wrap(errcode.SchemaInvalid, errors.New(msg), "%s:%d: invalid YAML", ps.name, line)
}

func (ps *parser) policy(root *yaml.Node) (*Policy, error) {
	p := Default()
	seen, err := ps.fields(root, "", []string{"version", "credentials", "protect", "coordinated", "symlinks", "audit"},
		func(key string, k, v *yaml.Node) error {
			var err error
			switch key {
			case "version":
				p.Version, err = ps.version(v)
			case "credentials":
				err = ps.credentials(v, &p.Credentials)
			case "protect":
				err = ps.protect(v, &p.Protect)
			case "coordinated":
				err = ps.coordinated(v, &p.Coordinated)
			case "symlinks":
				p.Symlinks, err = ps.str(v, "symlinks")
				if err == nil && p.Symlinks != SymlinksInsideOnly {
					err = ps.errf(v, "symlinks", "unknown mode %q (want %q)", p.Symlinks, SymlinksInsideOnly)
				}
			case "audit":
				err = ps.audit(v, &p.Audit)
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	if !seen["version"] {
		return nil, ps.errf(root, "version", "required (want version: 1)")
	}
	return p, nil
}

func (ps *parser) version(v *yaml.Node) (int, error) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		return 0, ps.errf(v, "version", "expected an integer, got %s", describe(v))
	}
	var n int64
	if err := v.Decode(&n); err != nil || n != 1 {
		return 0, ps.errf(v, "version", "unsupported version %s (want 1)", v.Value)
	}
	return 1, nil
}

func (ps *parser) credentials(v *yaml.Node, c *Credentials) error {
	_, err := ps.fields(v, "credentials", []string{"defaults", "deny", "allow", "hide"},
		func(key string, k, v *yaml.Node) error {
			var err error
			field := "credentials." + key
			switch key {
			case "defaults":
				c.Defaults, err = ps.boolean(v, field)
			case "deny":
				c.Deny, err = ps.globs(v, field)
				c.DenySources = ps.sources(v, len(c.Deny))
			case "allow":
				c.Allow, err = ps.globs(v, field)
				c.AllowSources = ps.sources(v, len(c.Allow))
			case "hide":
				c.Hide, err = ps.boolean(v, field)
			}
			return err
		})
	return err
}

func (ps *parser) protect(v *yaml.Node, pr *Protect) error {
	_, err := ps.fields(v, "protect", []string{"defaults", "paths", "allow"},
		func(key string, k, v *yaml.Node) error {
			var err error
			field := "protect." + key
			switch key {
			case "defaults":
				pr.Defaults, err = ps.boolean(v, field)
			case "paths":
				pr.Paths, err = ps.globsChecked(v, field, checkProtectGlob)
				pr.PathSources = ps.sources(v, len(pr.Paths))
			case "allow":
				pr.Allow, err = ps.globs(v, field)
				pr.AllowSources = ps.sources(v, len(pr.Allow))
			}
			return err
		})
	return err
}

func (ps *parser) coordinated(v *yaml.Node, c *Coordinated) error {
	_, err := ps.fields(v, "coordinated", []string{"defaults", "paths"},
		func(key string, k, v *yaml.Node) error {
			var err error
			field := "coordinated." + key
			switch key {
			case "defaults":
				c.Defaults, err = ps.boolean(v, field)
			case "paths":
				c.Paths, err = ps.globs(v, field)
				c.PathSources = ps.sources(v, len(c.Paths))
			}
			return err
		})
	return err
}

func (ps *parser) audit(v *yaml.Node, a *Audit) error {
	if isNull(v) {
		return nil
	}
	seen, err := ps.fields(v, "audit", []string{"path"}, func(key string, k, v *yaml.Node) error {
		p, err := ps.str(v, "audit.path")
		if err != nil {
			return err
		}
		if msg := checkAuditPath(p, false); msg != "" {
			return ps.errf(v, "audit.path", "%s", msg)
		}
		a.Path = p
		return nil
	})
	if err == nil && !seen["path"] {
		err = ps.errf(v, "audit.path", "required when audit is given")
	}
	return err
}

// fields walks a mapping, refusing unknown and duplicate keys. A null value
// (an empty section) is an empty mapping.
func (ps *parser) fields(n *yaml.Node, field string, known []string, fn func(key string, k, v *yaml.Node) error) (map[string]bool, error) {
	seen := make(map[string]bool)
	if isNull(n) && field != "" {
		return seen, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, ps.errf(n, field, "expected a mapping, got %s", describe(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return nil, ps.errf(k, field, "expected a field name, got %s", describe(k))
		}
		path := k.Value
		if field != "" {
			path = field + "." + k.Value
		}
		if !slices.Contains(known, k.Value) {
			return nil, ps.errf(k, path, "unknown field (want one of %s)", strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return nil, ps.errf(k, path, "duplicate field")
		}
		seen[k.Value] = true
		if v.Kind == yaml.AliasNode {
			return nil, ps.errf(v, path, "YAML aliases are not supported")
		}
		if err := fn(k.Value, k, v); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

func (ps *parser) boolean(v *yaml.Node, field string) (bool, error) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		return false, ps.errf(v, field, "expected true or false, got %s", describe(v))
	}
	var b bool
	if err := v.Decode(&b); err != nil {
		return false, ps.wrap(v, field, err)
	}
	return b, nil
}

func (ps *parser) str(v *yaml.Node, field string) (string, error) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return "", ps.errf(v, field, "expected a string, got %s", describe(v))
	}
	return v.Value, nil
}

// globs reads a list of globs; null is the empty list.
func (ps *parser) globs(v *yaml.Node, field string) ([]string, error) {
	return ps.globsChecked(v, field, checkGlob)
}

// globsChecked is globs with its own check of each glob.
func (ps *parser) globsChecked(v *yaml.Node, field string, check func(string) error) ([]string, error) {
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, ps.errf(v, field, "expected a list of globs, got %s", describe(v))
	}
	out := make([]string, 0, len(v.Content))
	for i, e := range v.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		if e.Kind == yaml.AliasNode {
			return nil, ps.errf(e, f, "YAML aliases are not supported")
		}
		g, err := ps.str(e, f)
		if err != nil {
			return nil, err
		}
		if err := check(g); err != nil {
			return nil, ps.wrap(e, f, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// sources names where each of a list's n globs was written, "policy:FILE:LINE",
// so that an audit line can say which line of which file refused.
func (ps *parser) sources(v *yaml.Node, n int) []string {
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i, e := range v.Content[:n] {
		out[i] = fmt.Sprintf("policy:%s:%d", ps.name, e.Line)
	}
	return out
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's kind for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing (null)"
		case "!!str":
			return fmt.Sprintf("string %q", truncate(n.Value))
		case "!!int":
			return "integer " + truncate(n.Value)
		case "!!float":
			return "number " + truncate(n.Value)
		case "!!bool":
			return "boolean " + n.Value
		default:
			return fmt.Sprintf("%s %q", n.ShortTag(), truncate(n.Value))
		}
	}
	return "an empty document"
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
