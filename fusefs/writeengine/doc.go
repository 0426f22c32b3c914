// Package writeengine is the write engine of a realm mount: one owner's
// write in progress of one file, from its first open to its last release.
// It keeps the owner's new bytes in a hidden temp beside the file, commits
// them by a rename (or in place for a file with several links), appends in
// place while nothing is uncommitted, keeps conflict and recovery copies,
// and settles a killed writer's bytes. It is the only code that drives the
// write protocol (fusefs/writeproto), which decides; the engine performs,
// and gathers the facts a decision needs. Each open of a write is a File,
// with one method per kernel event on its handle (a close's facts from
// /proc: closing.go); an open of a coordinated file, written in place by
// every owner, is an InPlace.
//
// It sits between the go-fuse adapters (fusefs: nodes and handles decode
// a request, call the engine, answer) and the layers it uses: dirfd, the
// only system calls on BACKING, and locks, the lock table whose entries
// carry the writes. It does not import fusefs: what it needs of the mount
// (the nodes the kernel knows, kernel notifications, the watcher, the
// audit and the daemon's log, the protect rule, descriptor charging, the
// mount's name locks) it reaches through Host, which fusefs implements;
// what a closing thread still holds, through Processes (procinfo's
// Resolver, Config.Procs).
package writeengine
