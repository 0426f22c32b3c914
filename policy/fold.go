package policy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Credential names are matched the way the most forgiving backing
// filesystem would resolve them, so that a case-insensitive BACKING (vfat,
// exFAT, ntfs-3g with ignore_case, ext4 casefold) cannot be asked for .ENV
// to open .env: deny globs and the path are both folded before matching.
// Folding only ever adds refusals, so on a case-sensitive filesystem it
// refuses .ENV too, which is harmless. Allow globs match the path as
// written: an exception never grows beyond the names it spells.

// fold maps s to one representative of its Unicode simple case folding
// class, rune by rune: the smallest rune of the class (unicode.SimpleFold's
// orbit), in lower case when that is an ASCII letter, so that ASCII paths,
// the common case, are their own folding. Bytes that are not UTF-8 are kept
// as they are. Format characters (zero-width joiners, direction marks,
// byte order marks) and other default-ignorable code points are dropped:
// older ext4 casefold lookups ignore them, so .e<ZWJ>nv would open .env.
// No normalisation form is applied (see docs/policy.md): the built-in set is
// ASCII, and the one non-ASCII rune canonically equivalent to an ASCII
// letter, the Kelvin sign, folds to k anyway.
func fold(s string) string {
	if isFolded(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteByte(s[i])
			i++
			continue
		}
		i += size
		if ignorable(r) {
			continue
		}
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// isFolded reports whether s is ASCII without upper-case letters, which
// fold leaves as it is.
func isFolded(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// foldRune is the representative of r's simple case folding class.
func foldRune(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	if 'A' <= m && m <= 'Z' {
		m += 'a' - 'A'
	}
	return m
}

// ignorable reports runes a name lookup may skip: format characters and
// the other default-ignorable code points.
func ignorable(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}

// trimSegments drops the trailing dots and spaces of every segment of rel,
// as vfat and exFAT do when they look a name up (server.pem. opens
// server.pem); a segment that would become empty is kept. It returns rel
// itself when no segment ends in either.
func trimSegments(rel string) string {
	if !endsInDotOrSpace(rel) {
		return rel
	}
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		if t := strings.TrimRight(s, ". "); t != "" {
			segs[i] = t
		}
	}
	return strings.Join(segs, "/")
}

// endsInDotOrSpace reports whether a segment of rel ends in '.' or ' '.
func endsInDotOrSpace(rel string) bool {
	for i := 0; i < len(rel); i++ {
		if c := rel[i]; (c == '.' || c == ' ') && (i+1 == len(rel) || rel[i+1] == '/') {
			return true
		}
	}
	return false
}
