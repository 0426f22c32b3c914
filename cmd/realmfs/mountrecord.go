package main

import (
	"errors"
	"log/slog"
	"os"

	"github.com/realm-dev/realm/internal/rundir"
)

// recordMount writes the daemon's mount record (internal/rundir: where
// `realmfs audit MOUNTPOINT` finds the audit log; a failure is logged: the
// mount serves without it) and returns its removal.
func recordMount(cfg config, realMountpoint string, logger *slog.Logger) (remove func()) {
	dev, err := mountDevice(realMountpoint)
	if err == nil {
		remove, err = rundir.WriteRecord(dev, rundir.Record{Pid: os.Getpid(), Backing: cfg.backing,
			Mountpoint: realMountpoint, AuditLog: cfg.auditLog, Log: cfg.daemonLog})
	}
	switch {
	case errors.Is(err, rundir.ErrNoRuntimeDir):
		logger.Info("no mount record", "err", err) // as designed, not something gone wrong
		return func() {}
	case err != nil:
		logger.Warn("no mount record", "err", err)
		return func() {}
	}
	return remove
}
