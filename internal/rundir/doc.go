// Package rundir is how a realmfs daemon and the commands that ask about
// its mount find each other: the daemon's control socket (`realmfs status`,
// `realmfs journal undo` and `journal diff` ask the daemon through it) and
// its mount record (`realmfs audit MOUNTPOINT` finds the audit log by it).
// Both are named by the mount's device number, which mountinfo gives for a
// mountpoint and which is unique while it is mounted, in the runtime
// directory of the daemon's user: /run/realmfs for root,
// $XDG_RUNTIME_DIR/realmfs for another user.
//
// It knows nothing of what the daemon answers: requests and replies are
// one JSON object each way, the reply's "error" field carrying a refusal.
package rundir
