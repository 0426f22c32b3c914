package policy

import "strings"

// Coordinated paths. A program that shares a file between its processes
// through POSIX record locks and a shared mapping (SQLite's database, its
// -wal, -shm and -journal files) orders its own writers: it reads and
// writes the file in place, while other processes, in other owners, hold
// it open and mapped. The mount serves such a file as the host's
// filesystem would: one file for every owner, written in place, its record
// locks seen by all, no temp and no write lock of the lock table between
// owners. Every other guard (credentials, protect, host meaning) applies to
// it unchanged.

// DefaultCoordinatedGlobs is the built-in coordinated set, applied when a
// policy has coordinated.defaults: true (the default): SQLite's files by
// the names its documentation gives them.
var DefaultCoordinatedGlobs = []Glob{
	{"**/*.db", "SQLite: the usual name of a database file"},
	{"**/*.sqlite", "SQLite: the usual name of a database file"},
	{"**/*.sqlite3", "SQLite: the usual name of a database file"},
	{"**/*.db3", "SQLite: the usual name of a database file"},
	{"**/*-wal", "SQLite tempfiles(7): the write-ahead log, DATABASE-wal"},
	{"**/*-shm", "SQLite walformat: the WAL index, DATABASE-shm, mmap'd and locked by every connection"},
	{"**/*-journal", "SQLite tempfiles(7): the rollback journal, DATABASE-journal"},
}

// Coordinated is the coordinated section of the policy file.
type Coordinated struct {
	// Defaults includes DefaultCoordinatedGlobs (YAML key defaults; true
	// unless the file says false).
	Defaults bool
	// Paths holds globs added to the set (YAML key paths).
	Paths []string
	// PathSources: where each glob was written (as
	// Credentials.DenySources), for realmfs explain.
	PathSources []string
}

// Coordinated reports whether rel is a coordinated path: a coordinated
// glob matches it, as written. "" (the root) never is.
func (m *Matcher) Coordinated(rel string) bool {
	if m == nil {
		m = defaultMatcher()
	}
	return rel != "" && m.coordinated.match(rel)
}

// CoordinatedByName reports whether every coordinated glob is **/ and a
// pattern of one segment (the built-in set is), so that Coordinated of a
// path's last segment answers for the path: a caller on a hot path (every
// open) need not build the path.
func (m *Matcher) CoordinatedByName() bool {
	if m == nil {
		m = defaultMatcher()
	}
	return !m.coordinatedNeedsPath
}

// addCoordinated compiles p's coordinated globs into m; an invalid one
// (a hand-built Policy not validated) adds nothing: the path keeps the
// mount's atomic writes.
func (m *Matcher) addCoordinated(p *Policy) {
	add := func(g string) {
		m.coordinated.add(g)
		if base, ok := strings.CutPrefix(g, "**/"); !ok || strings.Contains(base, "/") || strings.Contains(base, "**") {
			m.coordinatedNeedsPath = true
		}
	}
	if p.Coordinated.Defaults {
		for _, g := range DefaultCoordinatedGlobs {
			add(g.Pattern)
		}
	}
	for _, g := range p.Coordinated.Paths {
		add(g)
	}
}
