package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// TestOpenJournalDefault: the journal is on by default; a read-only mount
// has none unless asked for; one no option asked for that cannot be
// opened (its LOCK held by another mount of BACKING) is left off with a
// warning, and one asked for fails the mount.
func TestOpenJournalDefault(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        string
		held        bool // another journal holds BACKING's LOCK
		wantJournal bool
		wantErr     bool
		wantWarning bool
	}{
		{name: "default", wantJournal: true},
		{name: "off", opts: "journal=off"},
		{name: "read-only", opts: "ro"},
		{name: "read-only, asked for", opts: "ro,journal=on", wantJournal: true},
		{name: "default, held elsewhere", held: true, wantWarning: true},
		{name: "asked for, held elsewhere", opts: "journal=on", held: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backing := t.TempDir()
			mo, err := parseMountOptions([]string{tc.opts})
			if err != nil {
				t.Fatal(err)
			}
			if tc.held {
				root, err := dirfd.OpenRoot(backing)
				if err != nil {
					t.Fatal(err)
				}
				other, err := journal.Open(root, journal.DefaultDir, journal.Options{})
				dirfd.Close(root)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close()
			}
			var log bytes.Buffer
			root, err := dirfd.OpenRoot(backing)
			if err != nil {
				t.Fatal(err)
			}
			defer dirfd.Close(root)
			j, p, err := openJournal(config{backing: backing, mount: mo}, root, nil, slog.New(slog.NewTextHandler(&log, nil)))
			if (err != nil) != tc.wantErr {
				t.Fatalf("openJournal: %v, want an error: %v", err, tc.wantErr)
			}
			if err == nil {
				p.Stop()
			}
			if j != nil {
				j.Close()
			}
			if (j != nil) != tc.wantJournal {
				t.Errorf("journal opened: %v, want %v", j != nil, tc.wantJournal)
			}
			if warned := strings.Contains(log.String(), "no journal of changes"); warned != tc.wantWarning {
				t.Errorf("warned: %v, want %v; log:\n%s", warned, tc.wantWarning, log.String())
			}
			_, statErr := os.Stat(filepath.Join(backing, journal.DirName))
			if made := statErr == nil; made != (tc.wantJournal || tc.held) {
				t.Errorf("%s made: %v", journal.DirName, made)
			}
		})
	}
}
