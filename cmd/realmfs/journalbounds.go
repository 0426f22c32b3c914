package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/journal"
)

// The journal's bounds (-o journal_max, journal_max_files, journal_keep;
// docs/JOURNAL.md, Bounds): applied at mount, before the mount is ready,
// and then by a goroutine of the daemon whenever the journal has grown
// (journal.Grown: what it holds passed a bound, a segment rotated, or
// many records appended) and once an hour for the age bound, apart from
// every request.
const (
	defaultJournalMax  = 1 << 30
	defaultJournalKeep = 7 * 24 * time.Hour
	// The files bound's default (journal_max_files unset): a tenth of
	// BACKING's inodes, at most maxDefaultJournalFiles and at least
	// minDefaultJournalFiles. Empty kept files weigh no blocks, so
	// journal_max alone lets the journal take every inode; a tenth leaves
	// the owners nine, and fusefs/diskroom's reserve (a twentieth) the
	// host. 100000 files is a few days of an agent's changes, and on an
	// ext4 of 16 KiB an inode (mkfs's default) the tenth reaches it at
	// 16 GiB, where the 1 GiB journal_max is as large a share of blocks.
	// A filesystem that reports no inode count (btrfs) gets the most.
	maxDefaultJournalFiles = 100000
	minDefaultJournalFiles = 16
	// pruneInterval: how often the age bound is applied to a journal
	// that does not grow.
	pruneInterval = time.Hour
)

// sizeUnits are the suffixes a size may end with: 1024-based.
var sizeUnits = map[byte]int64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}

// parseSize reads -o key=SIZE: a number of bytes with an optional suffix
// K, M, G or T (1024-based; either case), more than 0.
func parseSize(key, val string) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, badValue(key, val, why+"; want a size in bytes with an optional suffix K, M, G or T (1024-based), e.g. 512M")
	}
	if val == "" {
		return bad("empty")
	}
	digits, unit := val, int64(1)
	if last := val[len(val)-1]; last < '0' || last > '9' {
		u, ok := sizeUnits[byte(unicode.ToUpper(rune(last)))]
		if !ok {
			return bad(fmt.Sprintf("%q is not a suffix", string(last)))
		}
		digits, unit = val[:len(val)-1], u
	}
	n, err := strconv.ParseUint(digits, 10, 63)
	switch {
	case digits == "" || err != nil && !errors.Is(err, strconv.ErrRange):
		return bad(fmt.Sprintf("%q is not a whole number", digits))
	case err != nil || n > uint64(math.MaxInt64/unit):
		return bad("too large")
	case n == 0:
		return bad("a journal of 0 bytes keeps nothing")
	}
	return int64(n) * unit, nil
}

// parseKeep reads -o key=DURATION: a Go duration (36h, 90m) or a number
// of days (7d, 1.5d), more than 0.
func parseKeep(key, val string) (time.Duration, error) {
	bad := func(why string) (time.Duration, error) {
		return 0, badValue(key, val, why+"; want a duration such as 7d, 36h or 90m")
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(val, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return bad(fmt.Sprintf("%q is not a number of days", days))
		}
		if n*24 > float64(math.MaxInt64/int64(time.Hour)) {
			return bad("too long")
		}
		d = time.Duration(n * 24 * float64(time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(val); err != nil {
			return bad(strings.TrimPrefix(err.Error(), "time: "))
		}
	}
	if d <= 0 {
		return bad("it must be more than 0")
	}
	return d, nil
}

// parseFiles reads -o key=N: a whole number of files, at least 1.
func parseFiles(key, val string) (int64, error) {
	const want = "; want a number of files, at least 1"
	n, err := strconv.ParseInt(val, 10, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange):
		return 0, badValue(key, val, "too large"+want)
	case err != nil:
		return 0, badValue(key, val, fmt.Sprintf("%q is not a whole number", val)+want)
	case n <= 0:
		return 0, badValue(key, val, "a journal of 0 files keeps nothing"+want)
	}
	return n, nil
}

// defaultJournalFiles is the files bound for a filesystem of inodes
// inodes (0: it does not say).
func defaultJournalFiles(inodes uint64) int64 {
	if inodes == 0 {
		return maxDefaultJournalFiles
	}
	return max(minDefaultJournalFiles, min(maxDefaultJournalFiles, int64(inodes/10)))
}

// journalBounds are the bounds mo asks of j: journal_max_files unset, a
// share of the inodes of j's filesystem (defaultJournalFiles).
func journalBounds(j *journal.Journal, mo mountOptions) journal.Bounds {
	b := journal.Bounds{MaxBytes: mo.journalMax, MaxFiles: mo.journalMaxFiles, Keep: mo.journalKeep}
	if b.MaxFiles == 0 {
		var st unix.Statfs_t
		if j.Statfs(&st) == nil {
			b.MaxFiles = defaultJournalFiles(st.Files)
		} else {
			b.MaxFiles = maxDefaultJournalFiles
		}
	}
	return b
}

// pruneJournal applies the bounds once, logging what they dropped; pace,
// if set, paces its removals (journal.Bounds.Pace).
func pruneJournal(j *journal.Journal, mo mountOptions, pace func(urgent func() bool), logger *slog.Logger) {
	b := journalBounds(j, mo)
	b.Pace = pace
	start := time.Now()
	st, err := j.Prune(b)
	if err != nil {
		logger.Error("journal prune", "err", err)
		return
	}
	if st.Segments > 0 {
		bytes, files := j.Held()
		logger.Info("journal pruned", "segments", st.Segments, "records", st.Records, "kept", st.Kept,
			"bytes", st.Bytes, "pruned_to", j.Pruned(), "held_bytes", bytes, "held_files", files,
			"journal_max", b.MaxBytes, "journal_max_files", b.MaxFiles, "journal_keep", b.Keep,
			"took", time.Since(start).Round(time.Millisecond))
	}
}

// A pruner applies a journal's bounds in the background (startPruner).
type pruner struct {
	pacer pacer
	stop  func()
}

// startPruner applies the bounds whenever the journal grows and once an
// hour, until Stop, its removals paced once paceBy names the mount's
// count of requests.
func startPruner(j *journal.Journal, mo mountOptions, logger *slog.Logger) *pruner {
	done, exited := make(chan struct{}), make(chan struct{})
	p := &pruner{pacer: pacer{done: done}}
	go func() {
		defer close(exited)
		tick := time.NewTicker(pruneInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-j.Grown():
			case <-tick.C:
			}
			pruneJournal(j, mo, p.pacer.pace, logger)
		}
	}()
	p.stop = func() {
		close(done)
		<-exited
	}
	return p
}

// paceBy paces the prunes' removals by the mount's count of requests
// (fusefs.FS.Requests). Nil: no journal, nothing to pace.
func (p *pruner) paceBy(requests func() uint64) {
	if p != nil {
		p.pacer.paceBy(requests)
	}
}

// Stop stops the pruner, waiting for a prune under way, which stops
// waiting for the mount to go idle. Nil: no journal.
func (p *pruner) Stop() {
	if p != nil {
		p.stop()
	}
}
