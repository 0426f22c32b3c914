package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// logFile is an append-only log that SIGHUP reopens under the same name:
// logrotate moves the file away and signals, and the next line goes to a
// new file, never to the rotated one and never lost. Writes and the reopen
// are serialised, so a line is whole in one file.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// openLog opens path for appending, creating it 0600 (audit lines and the
// daemon's reports name files of the workspace).
func openLog(path string) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &logFile{path: path, f: f}, nil
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// Reopen opens the path anew and switches to it. If the new file cannot be
// opened the old one stays in use: a failed rotation loses no line.
func (l *logFile) Reopen() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("reopen %s: %w", l.path, err)
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	return old.Close()
}

func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// Log formats of the daemon log.
const (
	logText = "text"
	logJSON = "json"
)

// newDaemonLogger makes the daemon's structured log on w: slog's text
// (key=value) or JSON lines. It becomes slog's and package log's default,
// so every report, go-fuse's --debug lines included, is one record.
func newDaemonLogger(w io.Writer, format string, debug bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if debug {
		opts.Level = slog.LevelDebug
	}
	var h slog.Handler
	if format == logJSON {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	logger := slog.New(h)
	slog.SetDefault(logger)
	log.SetFlags(0)
	return logger
}

// warnf is the guard's report hook (fusefs.Options.Logf): what it reports
// is something no caller could be told (a commit that failed at the last
// close, a writer killed, a conflict copy), so it is a warning.
func warnf(logger *slog.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		logger.Log(context.Background(), slog.LevelWarn, fmt.Sprintf(format, args...))
	}
}

// debugf is the guard's hook for the ordinary course of things
// (fusefs.Options.Debugf): written with --debug only.
func debugf(logger *slog.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		if logger.Enabled(context.Background(), slog.LevelDebug) {
			logger.Debug(fmt.Sprintf(format, args...))
		}
	}
}

// fuseLogger is the logger go-fuse reports through. Its --debug traces of
// requests ("rx N: …", "tx N: …"), the unmount notice and the opcodes it
// answers ENOSYS (POLL) are debug records; anything else it says is something going wrong in the
// transport (a failed splice, a failed write to /dev/fuse), so a warning.
func fuseLogger(logger *slog.Logger) *log.Logger {
	return log.New(fuseLogWriter{logger}, "", 0)
}

type fuseLogWriter struct{ logger *slog.Logger }

func (w fuseLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "rx ") || strings.HasPrefix(msg, "tx ") || strings.HasPrefix(msg, "received ENODEV") ||
		strings.HasPrefix(msg, "Unimplemented opcode") {
		level = slog.LevelDebug
	}
	w.logger.Log(context.Background(), level, msg, "from", "go-fuse")
	return len(p), nil
}
