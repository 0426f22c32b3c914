// Package ownerarg is the syntax an owner takes on the command line
// (realmfs journal --owner, realmctl session undo): OWNER, or
// OWNER@INCARNATION to name one life of a session:N or pid:N owner, whose
// number a later process may carry again. The journal's records hold the
// two apart (journal.Record's Owner and OwnerStart).
package ownerarg

import "strings"

// NoIncarnation is how --owner OWNER@NoIncarnation names the changes of
// OWNER whose records hold no incarnation (OwnerStart "").
const NoIncarnation = "-"

// Split splits an owner as --owner takes it: "OWNER@INCARNATION"
// (pinned) where OWNER is session:N or pid:N (or undo: of one), else s
// alone, unpinned ('@' is in cgroup paths: user@1000.service). An
// incarnation NoIncarnation is "".
func Split(s string) (owner, start string, pinned bool) {
	at := strings.LastIndexByte(s, '@')
	if at < 0 || !incarnated(s[:at]) {
		return s, "", false
	}
	owner, start = s[:at], s[at+1:]
	if start == NoIncarnation {
		start = ""
	}
	return owner, start, true
}

// Join is Split's inverse: owner@start (start "":
// NoIncarnation).
func Join(owner, start string) string {
	if start == "" {
		start = NoIncarnation
	}
	return owner + "@" + start
}

// incarnated reports whether owner is one whose name a pid is, and so has
// incarnations: session:N, pid:N, or undo: of one.
func incarnated(owner string) bool {
	for {
		rest, ok := strings.CutPrefix(owner, "undo:")
		if !ok {
			break
		}
		owner = rest
	}
	_, n, ok := strings.Cut(owner, ":")
	if !ok || !(strings.HasPrefix(owner, "session:") || strings.HasPrefix(owner, "pid:")) || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
