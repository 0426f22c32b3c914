// Package procinfo reads what the daemon needs to know about the processes
// that call it, from /proc: which lock owner a calling process belongs to
// (its cgroup, session or pid; Resolver.Owner, with a pidfd-checked cache),
// which descriptors of a file a closing thread still holds
// (Resolver.Descriptors, from /proc/TID/fdinfo), whether it is exiting and
// by which signal, and what a writing thread is doing (Resolver.WriterState).
// The lock table (package locks) keys its entries by the owners it names;
// nothing here takes or keeps a lock.
package procinfo

import "github.com/realm-dev/realm/locks"

// Owner is the lock table's owner: what Resolver.Owner names a caller.
type Owner = locks.Owner
