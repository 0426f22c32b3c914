package jdir

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// The pruned mark: the last seq the journal's bounds dropped, in a file of
// its own beside the log, so that an interrupted prune's segments are
// told from the ones still wanted.
const (
	Pruned     = "pruned"
	prunedTemp = "pruned.tmp"
)

// ReadPruned reads the pruned mark in the journal's directory dir (0: no
// mark, nothing pruned).
func ReadPruned(dir int) (uint64, error) {
	fd, err := dirfd.Open(dir, Pruned, unix.O_RDONLY, 0)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: opening %s: %w", Pruned, err)
	}
	f := os.NewFile(uintptr(fd), Pruned)
	defer f.Close()
	buf := make([]byte, 32)
	n, err := f.ReadAt(buf, 0)
	if n == 0 && err != nil {
		return 0, fmt.Errorf("journal: reading %s: %w", Pruned, err)
	}
	seq, err := strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("journal: %s holds %q: %w", Pruned, buf[:n], err)
	}
	return seq, nil
}

// WritePruned makes the pruned mark in dir name seq, durably: a temp
// written, synced and renamed over it, the directory synced.
func WritePruned(dir int, seq uint64) error {
	if err := dirfd.Unlink(dir, prunedTemp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("journal: removing %s: %w", prunedTemp, err)
	}
	fd, err := dirfd.Open(dir, prunedTemp, unix.O_WRONLY|unix.O_CREAT, 0o600)
	if err != nil {
		return fmt.Errorf("journal: making %s: %w", prunedTemp, err)
	}
	f := os.NewFile(uintptr(fd), prunedTemp)
	_, err = f.Write([]byte(strconv.FormatUint(seq, 10) + "\n"))
	if err == nil {
		err = dirfd.Fdatasync(fd)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dirfd.Rename(dir, prunedTemp, dir, Pruned, 0)
	}
	if err == nil {
		err = dirfd.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("journal: writing %s: %w", Pruned, err)
	}
	return nil
}
