package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
)

// lsRow is one session of `session ls -o json`.
type lsRow struct {
	ID    string
	State string // as the record remembers it
	Live  struct{ Status, Sandbox, Mount string }
}

// lsRow runs `session ls -o json` and returns the session id's row.
func (c *ctl) lsRow(id string) lsRow {
	c.tb.Helper()
	var rows []lsRow
	out := c.ok("-o", "json", "session", "ls")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		c.tb.Fatalf("session ls -o json: %v: %s", err, out)
	}
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	c.tb.Fatalf("session ls does not list %s: %s", id, out)
	return lsRow{}
}

// lsLine is the text row of session ls that names id.
func (c *ctl) lsLine(id string) string {
	c.tb.Helper()
	out := c.ok("session", "ls")
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, id+" ") {
			return l
		}
	}
	c.tb.Fatalf("session ls does not list %s:\n%s", id, out)
	return ""
}

// wantDeadExec runs session exec into id, in JSON and in text, and wants
// realm's REALM_NOT_ACTIVE (exit 69) naming why and what to do, never the
// runtime's own words nor its exit 125.
func (c *ctl) wantDeadExec(id, why string) {
	c.tb.Helper()
	r, code := c.exec(id, "", "true")
	if code != 69 || r.Error == nil || r.Error.Code != "REALM_NOT_ACTIVE" {
		c.tb.Fatalf("exec into a dead session: exit %d, %+v; want 69 REALM_NOT_ACTIVE", code, r)
	}
	for _, want := range []string{why, "realmctl reap", "realmctl session destroy " + id} {
		if !strings.Contains(r.Error.Message, want) {
			c.tb.Errorf("exec's message %q lacks %q", r.Error.Message, want)
		}
	}
	_, stderr, code := c.run("session", "exec", id, "--", "true")
	if code != 69 || !strings.Contains(stderr, "REALM_NOT_ACTIVE") || strings.Contains(stderr, "transport endpoint") {
		c.tb.Errorf("text exec into a dead session: exit %d, stderr %q; want 69 and realm's message", code, stderr)
	}
}

// TestRealmctlDeadSessions: session ls and inspect tell the state as it is
// (the record stays "active"), and exec into a session whose container was
// killed, or whose realmfs died, is realm's REALM_NOT_ACTIVE naming reap
// and destroy; reap then removes both.
func TestRealmctlDeadSessions(t *testing.T) {
	c := newCtl(t)
	killed := c.create(workspace(t), "--name", "killed")
	unmounted := c.create(workspace(t), "--name", "unmounted")
	for _, id := range []string{killed, unmounted} {
		if r := c.lsRow(id); r.State != "active" || r.Live.Status != "active" || r.Live.Sandbox != "running" || r.Live.Mount != "answering" {
			t.Fatalf("a fresh session is listed as %+v", r)
		}
	}

	// The container is killed through the service; podman wait returns
	// once it has stopped.
	cid := c.record(killed)["containerId"].(string)
	c.podman("kill", cid)
	c.podman("wait", cid)
	if r := c.lsRow(killed); r.State != "active" || r.Live.Status != "dead" || r.Live.Sandbox != "exited" || r.Live.Mount != "answering" {
		t.Errorf("session ls after the container was killed: %+v; want record active, live dead with sandbox exited", r)
	}
	if l := c.lsLine(killed); !strings.Contains(l, " dead (sandbox exited) ") {
		t.Errorf("session ls row: %q; want STATE dead (sandbox exited)", l)
	}
	c.wantDeadExec(killed, "its sandbox "+cid[:12]+" is exited")

	// The realmfs under the other session dies; its mount answers ENOTCONN.
	mnt := c.record(unmounted)["mount"].(string)
	pid := realmfsPid(t, mnt)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	wantDeadMount(t, mnt)
	if r := c.lsRow(unmounted); r.Live.Status != "dead" || r.Live.Sandbox != "running" || r.Live.Mount != "gone" {
		t.Errorf("session ls after realmfs died: %+v; want dead with the mount gone", r)
	}
	if l := c.lsLine(unmounted); !strings.Contains(l, " dead (mount gone) ") {
		t.Errorf("session ls row: %q; want STATE dead (mount gone)", l)
	}
	var in struct {
		Live struct{ Status, Sandbox, Mount string }
	}
	if out := c.ok("session", "inspect", "unmounted"); json.Unmarshal([]byte(out), &in) != nil || in.Live.Status != "dead" || in.Live.Mount != "gone" {
		t.Errorf("session inspect after realmfs died: %s", out)
	}
	c.wantDeadExec(unmounted, "its realmfs mount "+mnt+" does not answer")

	out := c.ok("-o", "json", "reap")
	if strings.TrimSpace(out) != `{"containersRemoved":2,"recordsDeleted":2,"mountsCleaned":2}` {
		t.Errorf("reap = %s, want both sessions removed", out)
	}
	if ids := strings.TrimSpace(c.ok("session", "ls", "-q")); ids != "" {
		t.Errorf("session ls -q after reap: %q", ids)
	}
}
