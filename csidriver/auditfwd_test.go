package csidriver

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFollowRotation: lines appended before and after a rotation (the log
// renamed to .1, a new one started) are forwarded once each, in order,
// whenever the forwarder runs, and an incomplete last line waits for its
// newline; lines from before the forwarding are not forwarded.
func TestFollowRotation(t *testing.T) {
	logs := &syncBuffer{}
	d := &Driver{cfg: Config{Log: slog.New(slog.NewJSONHandler(logs, nil)), StateDir: t.TempDir()}}
	path := d.auditPath("v")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	appendTo := func(p, s string) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(path, `{"n":0}`+"\n") // before the daemon: not forwarded
	d.forwardAudit("v", podInfo{Name: "p"}, auditSize(path))
	appendTo(path, `{"n":1}`+"\n"+`{"n":2}`+"\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(path, `{"n":3}`+"\n"+`{"n":4}`+"\n"+`{"n":`)
	d.stopAudit("v")
	var got []string
	for _, l := range strings.Split(logs.String(), "\n") {
		for n := 0; n <= 5; n++ {
			if strings.Contains(l, fmt.Sprintf(`"event":{"n":%d}`, n)) {
				got = append(got, fmt.Sprint(n))
			}
		}
	}
	if strings.Join(got, ",") != "1,2,3,4" {
		t.Fatalf("forwarded %v, want 1,2,3,4; the log:\n%s", got, logs.String())
	}
}
