// Package bounds says what a journal of changes may hold (-o journal_max,
// journal_max_files, journal_keep: docs/JOURNAL.md, Bounds), and how far
// past it a busy mount lets it go before its prune stops waiting for the
// mount to be idle. It is pure: no system call.
package bounds

import "time"

// Bounds are what a prune holds the journal to. A bound ≤ 0 is none.
type Bounds struct {
	// MaxBytes bounds the blocks of the segments and of the kept objects
	// whose only link the journal holds (journal_max).
	MaxBytes int64
	// MaxFiles bounds the files it holds: its segments and kept/'s
	// entries (journal_max_files).
	MaxFiles int64
	// Keep bounds the age of a segment's newest record (journal_keep).
	Keep time.Duration
	// Pace, if set, is called before each kept object a prune drops,
	// with urgent, which reports whether the journal, the objects the
	// prune has yet to drop counted, holds more than the bounds
	// Slackened. A pacer waits there while the mount is busy unless
	// urgent: at the bounds a prune removes an older kept object for each
	// one a change keeps, the kernel's work of a removal done twice, and
	// done while requests come it shares their CPU.
	Pace func(urgent func() bool)
}

// Slack is how far past its bounds, in parts of them, a journal may hold
// while a paced prune waits for the mount to be idle.
const Slack = 0.5

// Over reports whether bytes or files pass b.
func (b Bounds) Over(bytes, files int64) bool {
	return b.MaxBytes > 0 && bytes > b.MaxBytes || b.MaxFiles > 0 && files > b.MaxFiles
}

// Slackened is b with Slack more of each bound it sets.
func (b Bounds) Slackened() Bounds {
	b.MaxBytes += int64(float64(b.MaxBytes) * Slack)
	b.MaxFiles += int64(float64(b.MaxFiles) * Slack)
	return b
}
