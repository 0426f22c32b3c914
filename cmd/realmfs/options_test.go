package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/procinfo"
)

func TestParseMountOptions(t *testing.T) {
	def := mountOptions{passthrough: true, watch: true, cache: unsetCache, journalMax: 1 << 30, journalKeep: 7 * 24 * time.Hour}
	tests := []struct {
		name   string
		values []string
		want   func(*mountOptions) // applied to def
	}{
		{"none", nil, func(*mountOptions) {}},
		{"fstab generics ignored", []string{"rw,nosuid,nodev,_netdev,x-systemd.automount,defaults"}, func(*mountOptions) {}},
		{"allow_other", []string{"allow_other"}, func(m *mountOptions) { m.allowOther = true }},
		{"default_permissions accepted (always on)", []string{"default_permissions"}, func(*mountOptions) {}},
		{"repeated -o", []string{"ro", "fsname=work,passthrough=off"}, func(m *mountOptions) {
			m.readOnly, m.fsname, m.passthrough = true, "work", false
		}},
		{"lock owner and durability", []string{"lockowner=pid,durability=atomic"}, func(m *mountOptions) {
			m.lockOwner, m.durability = procinfo.OwnerPID, fusefs.DurabilityAtomic
		}},
		{"cache timeouts", []string{"entry_timeout=30,attr_timeout=0.5,negative_timeout=2"}, func(m *mountOptions) {
			m.cache = fusefs.CacheTimeouts{Entry: 30 * time.Second, Attr: 500 * time.Millisecond, Negative: 2 * time.Second}
		}},
		{"zero timeouts", []string{"entry_timeout=0,attr_timeout=0"}, func(m *mountOptions) {
			m.cache.Entry, m.cache.Attr = 0, 0
		}},
		{"no watcher", []string{"watch=off"}, func(m *mountOptions) { m.watch = false }},
		{"files by -o, as fstab gives them", []string{"policy=/etc/realm/p.yaml,audit_log=/var/log/a.jsonl,log=/var/log/d.log,log_format=json"}, func(m *mountOptions) {
			m.policyFile, m.auditLog, m.daemonLog, m.logFormat = "/etc/realm/p.yaml", "/var/log/a.jsonl", "/var/log/d.log", "json"
		}},
		{"nonempty", []string{"nonempty"}, func(m *mountOptions) { m.nonempty = true }},
		{"descriptor bound", []string{"max_fds_per_owner=50"}, func(m *mountOptions) { m.maxFds = 50 }},
		{"journal off by default, on and elsewhere", []string{"journal=on,journal_dir=/srv/j"}, func(m *mountOptions) { m.journal, m.journalDir = true, "/srv/j" }},
		{"journal off", []string{"journal=off"}, func(*mountOptions) {}},
		{"journal bounds", []string{"journal_max=512M,journal_keep=36h"}, func(m *mountOptions) {
			m.journalMax, m.journalKeep = 512<<20, 36*time.Hour
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMountOptions(tt.values)
			if err != nil {
				t.Fatalf("parseMountOptions(%q): %v", tt.values, err)
			}
			want := def
			tt.want(&want)
			if got != want {
				t.Errorf("parseMountOptions(%q) = %+v, want %+v", tt.values, got, want)
			}
		})
	}
}

func TestParseMountOptionsRefuses(t *testing.T) {
	for _, v := range []string{
		"bogus", "passthrough=maybe", "lockowner=team", "durability=none", "ro=1",
		"entry_timeout=-1", "attr_timeout=abc", "negative_timeout=NaN", "entry_timeout=3601", "attr_timeout=",
		"policy=", "audit_log", "log=", "log_format=xml", "nonempty=1",
		"max_fds_per_owner=0", "max_fds_per_owner=-3", "max_fds_per_owner=many", "max_fds_per_owner",
		"journal=yes", "journal", "journal_dir=",
		"journal_max=", "journal_max=0", "journal_max=10X", "journal_keep=0", "journal_keep=-1h", "journal_keep=7w",
	} {
		if _, err := parseMountOptions([]string{v}); !errors.Is(err, errUnknownOption) {
			t.Errorf("-o %s: error %v, want one wrapping errUnknownOption", v, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		val  string
		want int64
		err  string // in the error, where one is wanted
	}{
		{"1", 1, ""},
		{"4096", 4096, ""},
		{"1K", 1 << 10, ""},
		{"1k", 1 << 10, ""},
		{"512M", 512 << 20, ""},
		{"2G", 2 << 30, ""},
		{"1T", 1 << 40, ""},
		{"", 0, "empty"},
		{"0", 0, "keeps nothing"},
		{"0G", 0, "keeps nothing"},
		{"10X", 0, `"X" is not a suffix`},
		{"G", 0, `"" is not a whole number`},
		{"1.5G", 0, `"1.5" is not a whole number`},
		{"-1M", 0, `"-1" is not a whole number`},
		{"9999999999T", 0, "too large"},
		{"99999999999999999999", 0, "too large"},
	} {
		got, err := parseSize("journal_max", tt.val)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.val, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, errUnknownOption)):
			t.Errorf("parseSize(%q) = %d, %v; want an error saying %q", tt.val, got, err, tt.err)
		}
	}
}

func TestParseKeep(t *testing.T) {
	for _, tt := range []struct {
		val  string
		want time.Duration
		err  string // in the error, where one is wanted
	}{
		{"7d", 7 * 24 * time.Hour, ""},
		{"1.5d", 36 * time.Hour, ""},
		{"36h", 36 * time.Hour, ""},
		{"90m", 90 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"", 0, "invalid duration"},
		{"0", 0, "more than 0"},
		{"0d", 0, "more than 0"},
		{"-1h", 0, "more than 0"},
		{"7w", 0, `unknown unit "w"`},
		{"xd", 0, `"x" is not a number of days`},
		{"1e300d", 0, "too long"},
	} {
		got, err := parseKeep("journal_keep", tt.val)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parseKeep(%q) = %v, %v; want %v", tt.val, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, errUnknownOption)):
			t.Errorf("parseKeep(%q) = %v, %v; want an error saying %q", tt.val, got, err, tt.err)
		}
	}
}

func TestMaxFdsPerOwner(t *testing.T) {
	for _, tt := range []struct {
		opt   int
		limit uint64
		want  int
	}{
		{0, 20000, 10000}, // half the daemon's limit
		{50, 20000, 50},   // the option wins
		{0, 0, 0},         // limit unknown: no bound
		{0, 1 << 40, 0},   // unlimited in effect
	} {
		if got := maxFdsPerOwner(tt.opt, tt.limit); got != tt.want {
			t.Errorf("maxFdsPerOwner(%d, %d) = %d, want %d", tt.opt, tt.limit, got, tt.want)
		}
	}
}
