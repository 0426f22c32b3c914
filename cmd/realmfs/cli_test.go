package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpAndVersion: help asked for and the version go to stdout with
// exit 0, as sshfs and GNU tools print them; -V and -d are the short
// flags sshfs users type, -o debug and auto_unmount its options; an
// unknown flag, or an option's bad value (named as such), is a usage
// error on stderr.
func TestHelpAndVersion(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		stdout     string // a substring stdout must hold ("" : empty)
		stderr     string // a substring stderr must hold ("" : empty)
		stdoutNone bool
	}{
		{args: []string{"--help"}, code: 0, stdout: "Usage: realmfs"},
		{args: []string{"-h"}, code: 0, stdout: "Mount options"},
		{args: []string{"--version"}, code: 0, stdout: "realmfs "},
		{args: []string{"-V"}, code: 0, stdout: "realmfs "},
		{args: []string{"--no-such-flag"}, code: 2, stderr: "see realmfs --help", stdoutNone: true},
		{args: []string{"-d"}, code: 2, stderr: "BACKING", stdoutNone: true},
		{args: []string{"-o", "debug,auto_unmount"}, code: 2, stderr: "need BACKING and MOUNTPOINT", stdoutNone: true},
		{args: []string{"-o", "entry_timeout=99999"}, code: 2, stderr: "realmfs: -o entry_timeout=99999: want seconds from 0 to 3600\n", stdoutNone: true},
		{args: []string{"audit", "--code", "NOPE"}, code: 2, stderr: "unknown code; the codes are PATH_ESCAPE", stdoutNone: true},
		{args: []string{"audit", "--help"}, code: 0, stdout: "Usage: realmfs audit"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errb.String())
			}
			if !strings.Contains(out.String(), tt.stdout) || tt.stdoutNone && out.Len() > 0 {
				t.Errorf("stdout %q, want it to hold %q", out.String(), tt.stdout)
			}
			if tt.stderr == "" && errb.Len() > 0 || !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr %q, want %q", errb.String(), tt.stderr)
			}
		})
	}
}
