package policy

import (
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
)

// Matcher answers whether a workspace path is a credential. It is built once
// per policy and is safe for concurrent use: it is read-only after
// construction.
//
// Denied runs on every lookup and open of the mount, so the patterns are
// sorted into shapes that need no general glob engine: a literal base name or
// path tail, an extension, a base-name prefix or suffix, a directory name
// anywhere in the path, and anchored literals. Only what fits none of these
// falls back to doublestar.Match. Every shape is equivalent to doublestar on
// canonical paths; the tests and FuzzDenied hold the two against each other.
//
// Deny globs are stored folded (fold.go) and meet the folded path; allow
// globs meet the path as written.
type Matcher struct {
	deny, allow globSet
	// denyAsWritten holds the rare deny globs whose folding is not a valid
	// glob (a class range such as [Z-a] reverses): matched as written.
	denyAsWritten globSet
	hide          bool
	// rules holds each deny glob again, compiled on its own, to name the
	// one that matched a refusal (Rule); Denied never reads them.
	rules []denyRule
	// protect is the write-refused set (protect.go).
	protect protectSet
	// coordinated is the set written in place, shared (coordinated.go);
	// coordinatedNeedsPath: a glob of it looks at more than the last
	// segment.
	coordinated          globSet
	coordinatedNeedsPath bool
}

// Rule is the deny glob that makes a path a credential, and where it comes
// from: "built-in: SOURCES" for the built-in set, as --show-policy prints
// it, or "policy:FILE:LINE" for a policy file's deny glob.
type Rule struct {
	Glob   string `json:"glob"`
	Source string `json:"source"`
}

// denyRule is one deny glob in the same sets Matcher files it under.
type denyRule struct {
	rule              Rule
	folded, asWritten globSet
}

// globSet is a set of compiled patterns; match reports whether any matches.
type globSet struct {
	// **/<literal path tail>, indexed by its last segment. A one-segment tail
	// is the base name itself.
	tails map[string][]string
	// **/*<ext> where ext is "." followed by no other dot: looked up by the
	// base name's own extension.
	exts map[string]struct{}
	// **/*<suffix> and **/<prefix>* for other literals.
	suffixes, prefixes []string
	// **/<glob without / or **>: matched against the base name only.
	baseGlobs []string
	// **/<dir>/**: any segment equal to dir (doublestar's x/** matches x).
	dirs     map[string]struct{}
	dirFirst [256]bool // first bytes of dirs, to skip most lookups
	// **/<a/b>/**: the segment sequence anywhere.
	seqs []string
	// <literal> and <literal>/** anchored at the root.
	exact   map[string]struct{}
	anchors []string // literal + "/"
	// Everything else.
	general []string
	// all matches every path: a deny set with an invalid pattern fails
	// closed.
	all bool
}

// Matcher compiles the policy's credential globs. It assumes p is valid, as
// Parse, Load and Default return it; for a hand-built Policy call Validate
// first. An invalid deny glob that slips through makes every path denied (fail
// closed); an invalid allow glob allows nothing.
func (p *Policy) Matcher() *Matcher {
	if p == nil {
		p = Default()
	}
	m := &Matcher{hide: p.Credentials.Hide}
	if p.Credentials.Defaults {
		for _, g := range DefaultCredentialGlobs {
			m.addDeny(g.Pattern, "built-in: "+g.Source)
		}
		for _, g := range DefaultPublicGlobs {
			m.allow.add(g.Pattern)
		}
	}
	for i, g := range p.Credentials.Deny {
		src := "policy"
		if i < len(p.Credentials.DenySources) {
			src = p.Credentials.DenySources[i]
		}
		m.addDeny(g, src)
	}
	for _, g := range p.Credentials.Allow {
		m.allow.add(g) // an invalid allow glob allows nothing
	}
	if p.Protect.Defaults {
		for _, g := range DefaultProtectGlobs {
			m.protect.add(g.Pattern)
		}
		for _, g := range DefaultProtectExceptions {
			m.protect.allow.add(g.Pattern)
		}
	}
	for _, g := range p.Protect.Paths {
		m.protect.add(g)
	}
	for _, g := range p.Protect.Allow {
		m.protect.allow.add(g)
	}
	m.addCoordinated(p)
	return m
}

// addDeny adds a deny glob written at src, folded; an invalid one denies
// everything.
func (m *Matcher) addDeny(g, src string) {
	r := denyRule{rule: Rule{Glob: g, Source: src}}
	fileDeny(&r.folded, &r.asWritten, g)
	m.rules = append(m.rules, r)
	fileDeny(&m.deny, &m.denyAsWritten, g)
}

// fileDeny adds deny glob g to folded, or as written to asWritten when its
// folding is no glob; an invalid one makes folded match everything.
func fileDeny(folded, asWritten *globSet, g string) {
	if checkGlob(g) != nil {
		folded.all = true
		return
	}
	if !folded.add(fold(g)) {
		asWritten.add(g)
	}
}

var defaultMatcher = sync.OnceValue(func() *Matcher { return Default().Matcher() })

// Denied reports whether rel is a credential path: it matches the built-in set
// (when defaults are on) or a deny glob, and no allow glob. rel is the
// canonical workspace-relative path, slash-separated, without a leading slash;
// "" is the workspace root and is never denied.
//
// A deny glob matches whatever name a case-insensitive filesystem would
// resolve to the same file: rel and the globs are compared under Unicode
// simple case folding without default-ignorable code points (fold), and
// again with each segment's trailing dots and spaces dropped (vfat and
// exFAT ignore them). An allow glob matches rel byte-exactly. So folding
// can only add refusals. A nil Matcher applies the default policy, so a
// wiring mistake fails closed.
func (m *Matcher) Denied(rel string) bool {
	if m == nil {
		m = defaultMatcher()
	}
	if rel == "" {
		return false
	}
	return m.denies(rel) && !m.allow.match(rel)
}

// Rule names the deny glob that makes rel a credential, the first in the
// order --show-policy lists them, and reports false when Denied(rel) is
// false. It is for the audit line of a refusal, off the hot path: it tries
// the globs one by one.
func (m *Matcher) Rule(rel string) (Rule, bool) {
	if m == nil {
		m = defaultMatcher()
	}
	if !m.Denied(rel) {
		return Rule{}, false
	}
	for i := range m.rules {
		r := &m.rules[i]
		if denies(&r.folded, &r.asWritten, rel) {
			return r.rule, true
		}
	}
	// Unreachable: the sets Denied asks are the union of these.
	return Rule{}, false
}

// denies reports whether a deny glob matches rel under folding.
func (m *Matcher) denies(rel string) bool {
	return denies(&m.deny, &m.denyAsWritten, rel)
}

// denies reports whether folded matches rel folded, or asWritten matches
// rel, either also with each segment's trailing dots and spaces dropped.
func denies(folded, asWritten *globSet, rel string) bool {
	f := fold(rel)
	if folded.match(f) || asWritten.match(rel) {
		return true
	}
	if t := trimSegments(f); t != f && folded.match(t) {
		return true
	}
	if t := trimSegments(rel); t != rel && asWritten.match(t) {
		return true
	}
	return false
}

// Hide reports whether denied entries also vanish from lookup and listings.
func (m *Matcher) Hide() bool {
	if m == nil {
		return defaultMatcher().hide
	}
	return m.hide
}

// isLiteral reports whether s has no glob syntax at all.
func isLiteral(s string) bool {
	return !strings.ContainsAny(s, `*?[]{}\`)
}

// add files pattern under its shape; it reports false, and adds nothing, if
// the pattern is invalid.
func (s *globSet) add(pattern string) bool {
	if checkGlob(pattern) != nil {
		return false
	}
	if hasBraces(pattern) {
		// doublestar matches a brace group differently by where the
		// pattern is cut ("0*{}" and "0*{*}" miss "0", "**/0*{}" and
		// "**/0*{*}" match "0/0"): such a pattern is matched whole, as the
		// policy wrote it, never cut to its base name. No built-in glob
		// has one.
		s.general = append(s.general, pattern)
		return true
	}
	if rest, ok := strings.CutPrefix(pattern, "**/"); ok {
		if dir, ok := strings.CutSuffix(rest, "/**"); ok && isLiteral(dir) {
			s.addDir(dir)
			return true
		}
		if !strings.Contains(rest, "/") && !strings.Contains(rest, "**") {
			s.addBase(rest)
			return true
		}
		if isLiteral(rest) {
			s.addTail(rest)
			return true
		}
	}
	if isLiteral(pattern) {
		if s.exact == nil {
			s.exact = make(map[string]struct{})
		}
		s.exact[pattern] = struct{}{}
		return true
	}
	if dir, ok := strings.CutSuffix(pattern, "/**"); ok && isLiteral(dir) {
		s.anchors = append(s.anchors, dir+"/")
		return true
	}
	s.general = append(s.general, pattern)
	return true
}

// hasBraces reports whether pattern has a brace group ('{' outside
// character classes and escapes).
func hasBraces(pattern string) bool {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++ // the escaped byte
		case '[':
			// A class runs to its closing ']' (one right after '[' or
			// "[!"/"[^" is a member).
			j := i + 1
			if j < len(pattern) && (pattern[j] == '!' || pattern[j] == '^') {
				j++
			}
			if j < len(pattern) && pattern[j] == ']' {
				j++
			}
			for j < len(pattern) && pattern[j] != ']' {
				if pattern[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		case '{':
			return true
		}
	}
	return false
}

// addBase files a pattern that applies to the base name only.
func (s *globSet) addBase(g string) {
	if isLiteral(g) {
		s.addTail(g)
		return
	}
	if suf, ok := strings.CutPrefix(g, "*"); ok && isLiteral(suf) {
		if strings.LastIndexByte(suf, '.') == 0 {
			if s.exts == nil {
				s.exts = make(map[string]struct{})
			}
			s.exts[suf] = struct{}{}
		} else {
			s.suffixes = append(s.suffixes, suf)
		}
		return
	}
	if pre, ok := strings.CutSuffix(g, "*"); ok && isLiteral(pre) {
		s.prefixes = append(s.prefixes, pre)
		return
	}
	s.baseGlobs = append(s.baseGlobs, g)
}

func (s *globSet) addTail(tail string) {
	if s.tails == nil {
		s.tails = make(map[string][]string)
	}
	base := tail[strings.LastIndexByte(tail, '/')+1:]
	s.tails[base] = append(s.tails[base], tail)
}

func (s *globSet) addDir(dir string) {
	if strings.Contains(dir, "/") {
		s.seqs = append(s.seqs, dir)
		return
	}
	if s.dirs == nil {
		s.dirs = make(map[string]struct{})
	}
	s.dirs[dir] = struct{}{}
	s.dirFirst[dir[0]] = true
}

func (s *globSet) match(rel string) bool {
	if s.all {
		return true
	}
	base := rel[strings.LastIndexByte(rel, '/')+1:]
	if tails, ok := s.tails[base]; ok {
		for _, t := range tails {
			if len(t) == len(base) || hasSegmentSuffix(rel, t) {
				return true
			}
		}
	}
	if len(s.exts) > 0 {
		if i := strings.LastIndexByte(base, '.'); i >= 0 {
			if _, ok := s.exts[base[i:]]; ok {
				return true
			}
		}
	}
	for _, suf := range s.suffixes {
		if strings.HasSuffix(base, suf) {
			return true
		}
	}
	for _, pre := range s.prefixes {
		if strings.HasPrefix(base, pre) {
			return true
		}
	}
	for _, g := range s.baseGlobs {
		if doublestar.MatchUnvalidated(g, base) {
			return true
		}
	}
	if len(s.dirs) > 0 && s.anyDir(rel) {
		return true
	}
	for _, seq := range s.seqs {
		if containsSegments(rel, seq) {
			return true
		}
	}
	if _, ok := s.exact[rel]; ok {
		return true
	}
	for _, a := range s.anchors {
		if strings.HasPrefix(rel, a) || rel == a[:len(a)-1] {
			return true
		}
	}
	for _, g := range s.general {
		if doublestar.MatchUnvalidated(g, rel) {
			return true
		}
	}
	return false
}

// anyDir reports whether a segment of rel is one of s.dirs.
func (s *globSet) anyDir(rel string) bool {
	for rel != "" {
		seg := rel
		if i := strings.IndexByte(rel, '/'); i >= 0 {
			seg, rel = rel[:i], rel[i+1:]
		} else {
			rel = ""
		}
		if seg != "" && s.dirFirst[seg[0]] {
			if _, ok := s.dirs[seg]; ok {
				return true
			}
		}
	}
	return false
}

// hasSegmentSuffix reports whether rel is tail or ends in "/"+tail.
func hasSegmentSuffix(rel, tail string) bool {
	if len(rel) == len(tail) {
		return rel == tail
	}
	return len(rel) > len(tail) && rel[len(rel)-len(tail)-1] == '/' && strings.HasSuffix(rel, tail)
}

// containsSegments reports whether seq occurs in rel as whole segments.
func containsSegments(rel, seq string) bool {
	for off := 0; ; {
		i := strings.Index(rel[off:], seq)
		if i < 0 {
			return false
		}
		start, end := off+i, off+i+len(seq)
		if (start == 0 || rel[start-1] == '/') && (end == len(rel) || rel[end] == '/') {
			return true
		}
		off = start + 1
	}
}
