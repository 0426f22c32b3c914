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
	def := mountOptions{passthrough: true, watch: true, cache: unsetCache, journal: true, journalMax: 1 << 30, journalKeep: 7 * 24 * time.Hour}
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
		{"one P", []string{"procs=1"}, func(m *mountOptions) { m.procs = 1 }},
		{"the most Ps", []string{"procs=1024"}, func(m *mountOptions) { m.procs = 1024 }},
		{"journal on by default; asked for, elsewhere", []string{"journal=on,journal_dir=/srv/j"}, func(m *mountOptions) { m.journalAsked, m.journalDir = true, "/srv/j" }},
		{"journal asked for by its directory", []string{"journal_dir=/srv/j"}, func(m *mountOptions) { m.journalAsked, m.journalDir = true, "/srv/j" }},
		{"journal off", []string{"journal=off"}, func(m *mountOptions) { m.journal = false }},
		{"journal bounds", []string{"journal_max=512M,journal_max_files=5000,journal_keep=36h"}, func(m *mountOptions) {
			m.journalMax, m.journalMaxFiles, m.journalKeep = 512<<20, 5000, 36*time.Hour
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
		"procs=0", "procs=-1", "procs=1025", "procs=two", "procs",
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

// TestMountOptionValueErrors: a known option given a value it cannot take
// is told what the value lacks, never that the option is unknown; every
// option of the help's table has its bad values here.
func TestMountOptionValueErrors(t *testing.T) {
	bad := map[string][]struct{ opt, msg string }{
		"allow_other":         {{"allow_other=1", "-o allow_other=1: allow_other takes no value"}},
		"default_permissions": {{"default_permissions=yes", "-o default_permissions=yes: default_permissions takes no value"}},
		"ro":                  {{"ro=1", "-o ro=1: ro takes no value"}},
		"fsname":              {{"fsname", "-o fsname: want fsname=NAME"}, {"fsname=", "-o fsname=: want fsname=NAME"}},
		"subtype":             {{"subtype", "-o subtype: want subtype=NAME"}},
		"passthrough":         {{"passthrough=maybe", "-o passthrough=maybe: want on or off"}, {"passthrough", "-o passthrough: want passthrough=on|off"}},
		"lockowner":           {{"lockowner=team", "-o lockowner=team: want cgroup, session or pid"}},
		"durability":          {{"durability=none", "-o durability=none: want full or atomic"}},
		"policy":              {{"policy=", "-o policy=: want policy=FILE"}},
		"audit_log":           {{"audit_log", "-o audit_log: want audit_log=FILE"}},
		"log":                 {{"log=", "-o log=: want log=FILE"}},
		"log_format":          {{"log_format=xml", "-o log_format=xml: want text or json"}},
		"state_dir":           {{"state_dir=", "-o state_dir=: want state_dir=DIR|none"}},
		"nonempty":            {{"nonempty=1", "-o nonempty=1: nonempty takes no value"}},
		"debug":               {{"debug=1", "-o debug=1: debug takes no value"}},
		"auto_unmount":        {{"auto_unmount=yes", "-o auto_unmount=yes: auto_unmount takes no value"}},
		"max_fds_per_owner": {
			{"max_fds_per_owner=0", "-o max_fds_per_owner=0: want a number of open files, at least 1"},
			{"max_fds_per_owner=many", "-o max_fds_per_owner=many: want a number of open files, at least 1"},
		},
		"procs": {
			{"procs=0", "-o procs=0: want how many CPUs the daemon's Go code may use at once, 1 to 1024"},
			{"procs=1025", "-o procs=1025: want how many CPUs the daemon's Go code may use at once, 1 to 1024"},
		},
		"journal":     {{"journal=yes", "-o journal=yes: want on or off"}},
		"journal_dir": {{"journal_dir=", "-o journal_dir=: want journal_dir=DIR"}},
		"journal_max": {
			{"journal_max=12Q", `-o journal_max=12Q: "Q" is not a suffix; want a size in bytes with an optional suffix K, M, G or T (1024-based), e.g. 512M`},
			{"journal_max=0", "-o journal_max=0: a journal of 0 bytes keeps nothing; want a size in bytes with an optional suffix K, M, G or T (1024-based), e.g. 512M"},
		},
		"journal_max_files": {
			{"journal_max_files=0", "-o journal_max_files=0: a journal of 0 files keeps nothing; want a number of files, at least 1"},
			{"journal_max_files=1M", `-o journal_max_files=1M: "1M" is not a whole number; want a number of files, at least 1`},
		},
		"journal_keep": {
			{"journal_keep=soon", `-o journal_keep=soon: invalid duration "soon"; want a duration such as 7d, 36h or 90m`},
			{"journal_keep=0", "-o journal_keep=0: it must be more than 0; want a duration such as 7d, 36h or 90m"},
		},
		"watch": {{"watch=1", "-o watch=1: want on or off"}},
		"entry_timeout": {
			{"entry_timeout=99999", "-o entry_timeout=99999: want seconds from 0 to 3600"},
			{"entry_timeout=-1", "-o entry_timeout=-1: want seconds from 0 to 3600"},
		},
		"attr_timeout":     {{"attr_timeout=abc", "-o attr_timeout=abc: want seconds from 0 to 3600"}},
		"negative_timeout": {{"negative_timeout=NaN", "-o negative_timeout=NaN: want seconds from 0 to 3600"}},
	}
	for _, d := range optionDocs() {
		cases, ok := bad[d.key]
		if !ok {
			t.Errorf("-o %s (in the help) has no bad values in this test", d.key)
		}
		for _, c := range cases {
			_, err := parseMountOptions([]string{c.opt})
			var ve *optionValueError
			if !errors.As(err, &ve) || err.Error() != c.msg {
				t.Errorf("-o %s: error %v, want the value error %q", c.opt, err, c.msg)
			}
		}
		delete(bad, d.key)
	}
	for key := range bad {
		t.Errorf("-o %s: tested here but not in the help's table", key)
	}
	if _, err := parseMountOptions([]string{"bogus=1"}); err == nil || err.Error() != `-o bogus=1: unknown mount option (see realmfs --help)` {
		t.Errorf("-o bogus=1: %v, want an unknown option", err)
	}
}

// TestOptionDocsMatchParser: every option of the help's table parses in
// each of the forms it documents, so the table (which the completions, the
// man page and the value errors are made from) is the parser's.
func TestOptionDocsMatchParser(t *testing.T) {
	samples := map[string]string{"NAME": "n", "FILE": "/etc/f", "DIR": "/srv/d", "N": "7", "SECS": "1.5", "SIZE": "512M", "DURATION": "36h"}
	for _, d := range optionDocs() {
		forms := []string{d.key}
		if d.value != "" {
			forms = nil
			lits, free := d.choices()
			for _, l := range lits {
				forms = append(forms, d.key+"="+l)
			}
			if free {
				for _, part := range strings.Split(d.value, "|") {
					if v, ok := samples[part]; ok {
						forms = append(forms, d.key+"="+v)
					} else if strings.ToUpper(part) == part {
						t.Errorf("-o %s=%s: no sample value for %s", d.key, d.value, part)
					}
				}
			}
		}
		for _, f := range forms {
			if _, err := parseMountOptions([]string{f}); err != nil {
				t.Errorf("-o %s, as the help documents it: %v", f, err)
			}
		}
	}
}
