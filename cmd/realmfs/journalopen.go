package main

import (
	"fmt"
	"log/slog"

	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/diskroom"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/writeengine"
)

// openJournal opens the journal of changes (on unless -o journal=off) of
// the BACKING root holds, nil for none: BACKING/.realm-journal, or -o journal_dir (which
// fusefs/journal refuses on another filesystem or mount), durable as the
// mount's durability says. What its recovery found is logged. Its bounds
// are applied before it returns, and then by the pruner it starts
// (journalbounds.go), which closeJournal stops.
//
// A journal no option asked for (journalAsked) is left off where it has
// nothing to record (a read-only mount) or cannot be opened (BACKING on a
// read-only filesystem, its LOCK held by another mount of BACKING): the
// mount serves without one, and says so. One asked for fails the mount.
func openJournal(cfg config, root int, room *diskroom.Gauge, logger *slog.Logger) (j *journal.Journal, p *pruner, err error) {
	if !cfg.mount.journal || cfg.mount.readOnly && !cfg.mount.journalAsked {
		return nil, nil, nil
	}
	if j, err = openJournalDir(cfg, root, room, logger); err != nil {
		if cfg.mount.journalAsked {
			return nil, nil, err
		}
		logger.Warn("no journal of changes for this mount (realmfs journal list, diff and undo have nothing to show); -o journal=off says so without this warning", "error", err)
		return nil, nil, nil
	}
	pruneJournal(j, cfg.mount, nil, logger)
	return j, startPruner(j, cfg.mount, logger), nil
}

// openJournalDir opens the journal's directory, as openJournal says, of
// the BACKING root holds; room is BACKING's, the mount's own gauge (nil:
// the daemon is not root).
func openJournalDir(cfg config, root int, room *diskroom.Gauge, logger *slog.Logger) (*journal.Journal, error) {
	var err error
	dir := journal.DefaultDir
	if cfg.mount.journalDir != "" {
		if dir, err = dirfd.OpenRoot(cfg.mount.journalDir); err != nil {
			return nil, fmt.Errorf("journal directory %s: %w", cfg.mount.journalDir, err)
		}
		defer dirfd.Close(dir)
	}
	durable := cfg.mount.durability == fusefs.DurabilityFull
	// A filesystem that orders its metadata changes behind a flush
	// carries each intent durably before its change (fusefs/journal's
	// flush.go): the intents are written through, not flushed one by one.
	ordered := durable && writeengine.OrdersRenamedData(root)
	j, err := journal.Open(root, dir, journal.Options{Durable: durable, Ordered: ordered, Room: journalRoom(room)})
	if err != nil {
		where := cfg.mount.journalDir
		if where == "" {
			where = cfg.backing + "/" + journal.DirName
		}
		return nil, fmt.Errorf("journal %s: %w", where, err)
	}
	r := j.Recovery()
	logger.Info("journal opened", "dir", cfg.mount.journalDir, "durable", durable, "ordered", ordered,
		"segments", r.Segments, "records", r.Records, "cut_bytes", r.CutBytes, "damaged", r.Damaged,
		"rebuilt", r.Rebuilt, "done", r.Done, "aborted", r.Aborted, "outside", r.Outside,
		"kept_removed", r.KeptRemoved, "segments_removed", r.SegmentsRemoved)
	return j, nil
}

// journalRoom is the journal's Options.Room from g, the gauge of
// BACKING's room the mount takes its owners' writes from (journal_dir is
// on the same filesystem; nil for a daemon that is not root, whose
// writes the kernel holds to it). The daemon writes the journal as root:
// without it, the records of an agent's renames, chmods and removals on a
// full disk went on into root's reserve, up to journal_max
// (TestRootReserveKeptFromJournal).
func journalRoom(g *diskroom.Gauge) func(n int64) (refused, first bool) {
	if g == nil {
		return nil
	}
	return func(n int64) (bool, bool) {
		errno, first := g.Take(n)
		return errno != 0, first
	}
}

// closeJournal stops the pruner and closes the journal, once the mount is
// closed.
func closeJournal(j *journal.Journal, p *pruner, logger *slog.Logger) {
	if j == nil {
		return
	}
	p.Stop()
	if err := j.Close(); err != nil {
		logger.Error("journal close", "err", err)
	}
}
