package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/sandbox/label"
)

// TestRealmctlSession drives one session from create to destroy: files land
// in the workspace as its owner, output is bounded, exit codes are results,
// a timeout kills the whole tree, credentials stay unreadable, destroy
// removes container, mount and record, and exec afterwards is
// REALM_NOT_ACTIVE.
func TestRealmctlSession(t *testing.T) {
	c := newCtl(t)
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("API_KEY=SECRET-VALUE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(ws, ".env"), 1000, 1000)
	id := c.create(ws, "--name", "walkthrough")

	rec := c.record(id)
	if rec["state"] != "active" || rec["containerId"] == nil {
		t.Fatalf("record after create: %v", rec)
	}
	cid := rec["containerId"].(string)
	if got := c.podman("inspect", "--format", `{{index .Config.Labels "io.realm.managed"}} {{index .Config.Labels "io.realm.session"}} {{.HostConfig.NetworkMode}}`, cid); got != "true "+id+" none" {
		t.Errorf("container labels and network = %q, want %q", got, "true "+id+" none")
	}
	if mnts := c.realmfsMounts(); len(mnts) != 1 || mnts[0] != rec["mount"] {
		t.Errorf("realmfs mounts %v, want just %v", mnts, rec["mount"])
	}

	t.Run("write lands in the workspace as its owner", func(t *testing.T) {
		r, code := c.exec(id, "", "sh", "-c", "echo hi > /workspace/f")
		if code != 0 || r.ExitCode != 0 {
			t.Fatalf("exec = %+v, exit %d", r, code)
		}
		data, err := os.ReadFile(filepath.Join(ws, "f"))
		if err != nil || string(data) != "hi\n" {
			t.Fatalf("workspace f = %q, %v", data, err)
		}
		var st syscall.Stat_t
		syscall.Stat(filepath.Join(ws, "f"), &st)
		if st.Uid != 1000 || st.Gid != 1000 {
			t.Errorf("f is owned by %d:%d, want the workspace owner 1000:1000", st.Uid, st.Gid)
		}
	})

	t.Run("output bounded at 262144 bytes per stream", func(t *testing.T) {
		r, code := c.exec(id, "", "sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' o; head -c 307200 /dev/zero | tr '\\0' e >&2")
		if code != 0 || r.ExitCode != 0 {
			t.Fatalf("exit %d, exitCode %d", code, r.ExitCode)
		}
		if len(r.Stdout) != 262144 || !r.StdoutTruncated || strings.Trim(r.Stdout, "o") != "" {
			t.Errorf("stdout: %d bytes, truncated %v", len(r.Stdout), r.StdoutTruncated)
		}
		if len(r.Stderr) != 262144 || !r.StderrTruncated || strings.Trim(r.Stderr, "e") != "" {
			t.Errorf("stderr: %d bytes, truncated %v", len(r.Stderr), r.StderrTruncated)
		}
	})

	t.Run("non-zero exit is a result", func(t *testing.T) {
		r, code := c.exec(id, "", "sh", "-c", "echo out; echo err >&2; exit 3")
		if code != 0 || r.ExitCode != 3 || r.Stdout != "out\n" || r.Stderr != "err\n" || r.Error != nil {
			t.Errorf("json: exit %d, result %+v; want exit 0 with exitCode 3", code, r)
		}
		_, _, code = c.run("session", "exec", id, "--", "sh", "-c", "exit 3")
		if code != 3 {
			t.Errorf("text mode exited %d, want the command's 3", code)
		}
	})

	t.Run("timeout kills the whole process tree", func(t *testing.T) {
		start := time.Now()
		r, code := c.exec(id, "2s", "sh", "-c", "sleep 1000 & sleep 1000")
		if code != 124 || r.Error == nil || r.Error.Code != "TOOL_TIMEOUT" {
			t.Fatalf("exit %d, result %+v; want 124 and TOOL_TIMEOUT", code, r)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("a 2s timeout took %s", took)
		}
		ps, _ := c.exec(id, "", "ps", "-o", "pid,stat,args")
		for _, line := range strings.Split(ps.Stdout, "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && strings.Contains(line, "sleep 1000") {
				t.Errorf("a process of the timed-out command survived: %q\n%s", line, ps.Stdout)
			}
		}
	})

	t.Run("credential file unreadable inside", func(t *testing.T) {
		r, _ := c.exec(id, "", "cat", "/workspace/.env")
		if r.ExitCode == 0 || strings.Contains(r.Stdout, "SECRET") {
			t.Errorf("cat .env = %+v; want a failure without the secret", r)
		}
		if !strings.Contains(r.Stderr, "Permission denied") {
			t.Errorf("cat .env stderr = %q, want EACCES", r.Stderr)
		}
	})

	// make test streams 256 MiB, make soak 1 GiB (issue 5's figure): a
	// capture kept whole would pass the bound below either way.
	outMiB := envInt(t, "REALM_OUTPUT_MIB", 1024)
	t.Run(fmt.Sprintf("memory stays bounded for %d MiB of output", outMiB), func(t *testing.T) {
		rss := func(argv ...string) int64 {
			cmd := c.cmd(append([]string{"-o", "json", "session", "exec", id, "--timeout", "120s", "--"}, argv...)...)
			if out, err := cmd.Output(); err != nil {
				t.Fatalf("exec %v: %v %s", argv, err, out)
			}
			return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
		}
		base := rss("true")
		big := rss("head", "-c", strconv.Itoa(outMiB<<20), "/dev/zero")
		t.Logf("max RSS: %d KiB for true, %d KiB for %d MiB of output", base, big, outMiB)
		// Bounded means not growing with the output: a capture kept
		// whole would be all of it. What does grow is the garbage the GC
		// paces: the podman bindings' attach allocates a buffer for every
		// frame larger than 1 KiB (containers.DemuxFrame). Measured over
		// 22 CI runs of 1 GiB: 6.6 to 16.3 MiB above true's, so the bound
		// is twice the most seen, 1/32 of 1 GiB. One soak run grew 54
		// MiB: since then realmctl sets a soft memory limit of 40 MiB
		// (cmd/realmctl, memoryLimit), which keeps that garbage under it.
		if big-base > 32*1024 {
			t.Errorf("%d MiB of output grew realmctl by %d KiB (max RSS %d KiB vs %d KiB)", outMiB, big-base, big, base)
		}
	})

	out := c.ok("session", "list")
	if !strings.Contains(out, id) || !strings.Contains(out, "walkthrough") {
		t.Errorf("session list does not show the session:\n%s", out)
	}

	c.ok("session", "destroy", "walkthrough")
	if ids := c.containers("id=" + cid); len(ids) != 0 {
		t.Errorf("container %s still exists after destroy", cid)
	}
	if recs := c.records(); len(recs) != 0 {
		t.Errorf("records after destroy: %v", recs)
	}
	if mnts := c.realmfsMounts(); len(mnts) != 0 {
		t.Errorf("mounts after destroy: %v", mnts)
	}
	r, code := c.exec(id, "", "true")
	if code != 69 || r.Error == nil || r.Error.Code != "REALM_NOT_ACTIVE" {
		t.Errorf("exec on a destroyed session: exit %d, %+v; want 69 REALM_NOT_ACTIVE", code, r)
	}
}

// TestRealmctlSharedMount: two sessions on one workspace share one mount,
// each container is its own lock owner, so concurrent writers of one file
// conflict (EBUSY), and the mount goes with the last session.
func TestRealmctlSharedMount(t *testing.T) {
	c := newCtl(t)
	ws := workspace(t)
	a := c.create(ws)
	b := c.create(ws)
	if ma, mb := c.record(a)["mount"], c.record(b)["mount"]; ma != mb {
		t.Fatalf("sessions on one workspace have two mounts: %v, %v", ma, mb)
	}
	if mnts := c.realmfsMounts(); len(mnts) != 1 {
		t.Fatalf("realmfs mounts %v, want one", mnts)
	}

	// a holds /workspace/shared open for writing; b tries to write it.
	var wg sync.WaitGroup
	var ra execResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		// a holds the file until b has tried to write it (b-tried
		// appears), for a minute at most.
		ra, _ = c.exec(a, "", "sh", "-c", `exec 3>/workspace/shared; echo a >&3; touch /workspace/a-holds
i=0; until [ -e /workspace/b-tried ]; do i=$((i+1)); [ $i -lt 1200 ] || exit 9; sleep 0.05; done; echo a-done`)
	}()
	deadline := time.Now().Add(stateTimeout)
	for {
		if _, err := os.Stat(filepath.Join(ws, "a-holds")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session a never got to hold the file")
		}
		time.Sleep(50 * time.Millisecond)
	}
	rb, _ := c.exec(b, "", "sh", "-c", "echo b > /workspace/shared; s=$?; touch /workspace/b-tried; exit $s")
	wg.Wait()
	if ra.ExitCode != 0 {
		t.Errorf("holder: %+v", ra)
	}
	if rb.ExitCode == 0 || !strings.Contains(strings.ToLower(rb.Stderr), "busy") {
		t.Errorf("second writer: exitCode %d, stderr %q; want EBUSY", rb.ExitCode, rb.Stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "shared")); string(data) != "a\n" {
		t.Errorf("shared = %q, want the holder's %q", data, "a\n")
	}

	c.ok("session", "destroy", a)
	if mnts := c.realmfsMounts(); len(mnts) != 1 {
		t.Errorf("after destroying one of two sessions: mounts %v, want the shared one kept", mnts)
	}
	if r, _ := c.exec(b, "", "cat", "/workspace/shared"); r.Stdout != "a\n" {
		t.Errorf("the remaining session lost the mount: %+v", r)
	}
	c.ok("session", "destroy", b)
	if mnts := c.realmfsMounts(); len(mnts) != 0 {
		t.Errorf("after the last session: mounts %v, want none", mnts)
	}
}

// TestRealmctlValidateFirst: anything invalid is SCHEMA_INVALID (exit 2)
// and nothing happens: no container, no record, no mount.
func TestRealmctlValidateFirst(t *testing.T) {
	c := newCtl(t)
	ws := workspace(t)
	badPolicy := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(badPolicy, []byte("deny: [unclosed\n"), 0o644)
	// To the nanosecond: a second's slack let in the container the test
	// before this one made in its last second.
	since := time.Now().UTC().Format(time.RFC3339Nano)
	before := c.containers()

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"egress with scheme", []string{"--workspace", ws, "--egress", "https://example.com"}, "egress[0]"},
		{"egress duplicate", []string{"--workspace", ws, "--egress", "a.example.com", "--egress", "a.example.com:443"}, "egress[1]"},
		{"egress bad port", []string{"--workspace", ws, "--egress", "example.com:0"}, "egress[0]"},
		// Podman cannot bound a network to an allowlist: refused, never widened.
		{"egress on podman", []string{"--workspace", ws, "--runtime", "podman", "--egress", "api.example.com"}, "--runtime openshell"},
		{"invalid policy", []string{"--workspace", ws, "--policy", badPolicy}, "policy"},
		{"missing policy", []string{"--workspace", ws, "--policy", badPolicy + ".none"}, "policy"},
		{"missing workspace", []string{"--workspace", ws + "-none"}, "workspace"},
		{"relative workload", []string{"--workspace", ws, "--", "sleep", "100"}, "absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, code := c.run(append([]string{"-o", "json", "session", "create"}, tt.args...)...)
			var r execResult
			json.Unmarshal([]byte(out), &r)
			if code != 2 || r.Error == nil || r.Error.Code != "SCHEMA_INVALID" || !strings.Contains(r.Error.Message, tt.want) {
				t.Errorf("exit %d, output %s; want 2 and SCHEMA_INVALID naming %q", code, out, tt.want)
			}
		})
	}
	if after := c.containers(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("containers changed: before %v, after %v", before, after)
	}
	if ev := c.podman("events", "--stream=false", "--since", since, "--filter", "event=create", "--filter", "type=container", "--format", "{{.ID}}"); ev != "" {
		t.Errorf("the podman service saw container creates: %s", ev)
	}
	if recs := c.records(); len(recs) != 0 {
		t.Errorf("records: %v", recs)
	}
	if mnts := c.realmfsMounts(); len(mnts) != 0 {
		t.Errorf("mounts: %v", mnts)
	}
}

// TestRealmctlReap: the sweep removes the containers of its own state dir
// (labelled io.realm.state with the dir's id) in every state and only
// them, and an unlabelled one an older realmctl made where a record of
// this state dir names it; it leaves another state dir's containers (a
// reap of one state dir once deleted another's live sessions) and reports
// unlabelled ones no record names. It deletes every record (null container
// id, with container id, corrupt) and leaves other files alone; a second
// reap removes nothing.
func TestRealmctlReap(t *testing.T) {
	c := newCtl(t)
	img := "localhost/realm-base:latest"
	stateID, err := label.StateID(c.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	labels := func(session, state string) []string {
		l := []string{"--label", "io.realm.managed=true", "--label", "io.realm.session=" + session}
		if state != "" {
			l = append(l, "--label", label.State+"="+state)
		}
		return l
	}
	run := func(args ...string) string {
		return c.podman(append([]string{"run", "-d", "--network", "none"}, args...)...)
	}
	running := run(append(labels("aaaaaaaaaaa1", ""), img, "/bin/sleep", "1000")...) // unlabelled, named by a record
	exited := run(append(labels("aaaaaaaaaaa2", stateID), img, "/bin/true")...)
	created := c.podman(append(append([]string{"create", "--network", "none"}, labels("aaaaaaaaaaa3", stateID)...), img, "/bin/sleep", "1000")...)
	unlabelled := run(append(labels("aaaaaaaaaaa4", ""), img, "/bin/sleep", "1000")...)
	foreign := []string{
		run(img, "/bin/sleep", "1000"),
		run("--label", "io.realm.managed=false", img, "/bin/sleep", "1000"),
		run("--name", "other-x", "--label", "openshell.managed=true", "--label", "openshell.ai/sandbox-name=other-x", img, "/bin/sleep", "1000"),
		run(append(labels("aaaaaaaaaaa5", "0123456789abcdef"), img, "/bin/sleep", "1000")...), // another state dir's
		unlabelled,
	}
	t.Cleanup(func() { c.podman(append([]string{"rm", "-f", "-t", "0"}, foreign...)...) })
	c.podman("wait", exited)

	sessions := filepath.Join(c.stateDir, "sessions")
	os.MkdirAll(sessions, 0o700)
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(sessions, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("bbbbbbbbbbb1.json", `{"id":"bbbbbbbbbbb1","state":"creating","runtime":"podman","containerId":null}`)
	write("aaaaaaaaaaa1.json", fmt.Sprintf(`{"id":"aaaaaaaaaaa1","state":"stopping","runtime":"podman","containerId":%q}`, running))
	write("cccccccccccc.json", `{"id": "cccccc`)
	write("notes.txt", "not a record")
	os.WriteFile(filepath.Join(c.stateDir, "README"), []byte("mine"), 0o600)

	out := c.ok("-o", "json", "reap")
	var r struct {
		ContainersRemoved, RecordsDeleted, MountsCleaned int
		UnlabelledLeft                                   []string
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("reap output %q: %v", out, err)
	}
	if r.ContainersRemoved != 3 || r.RecordsDeleted != 3 || r.MountsCleaned != 0 ||
		len(r.UnlabelledLeft) != 1 || !strings.HasPrefix(r.UnlabelledLeft[0], "container ") {
		t.Errorf("reap = %s, want 3 containers and 3 records removed, one unlabelled container left", out)
	}
	for _, id := range []string{running, exited, created} {
		if len(c.containers("id="+id)) != 0 {
			t.Errorf("labelled container %s survived the reap", id[:12])
		}
	}
	for _, id := range foreign {
		if len(c.containers("id="+id)) != 1 {
			t.Errorf("foreign container %s was touched", id[:12])
		}
	}
	if recs := c.records(); len(recs) != 0 {
		t.Errorf("records left: %v", recs)
	}
	for _, f := range []string{filepath.Join(sessions, "notes.txt"), filepath.Join(c.stateDir, "README")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("non-record file %s: %v", f, err)
		}
	}
	out = c.ok("-o", "json", "reap")
	r.ContainersRemoved, r.RecordsDeleted = -1, -1
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.ContainersRemoved != 0 || r.RecordsDeleted != 0 || r.MountsCleaned != 0 {
		t.Errorf("second reap = %s, want nothing removed", out)
	}
}

// TestRealmctlReapDeadMount: kill -9 the realmfs of a session; reap removes
// the session's container and record and lazily unmounts the dead mount, so
// the mountpoint (and the workspace) is usable again.
func TestRealmctlReapDeadMount(t *testing.T) {
	c := newCtl(t)
	ws := workspace(t)
	id := c.create(ws)
	mnt := c.record(id)["mount"].(string)
	pid := realmfsPid(t, mnt)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	wantDeadMount(t, mnt)
	out := c.ok("-o", "json", "reap")
	if strings.TrimSpace(out) != `{"containersRemoved":1,"recordsDeleted":1,"mountsCleaned":1}` {
		t.Errorf("reap = %s, want one of each", out)
	}
	if _, err := os.ReadDir(mnt); err != nil {
		t.Errorf("mountpoint after reap: %v", err)
	}
	if mnts := c.realmfsMounts(); len(mnts) != 0 {
		t.Errorf("mounts after reap: %v", mnts)
	}
	id2 := c.create(ws)
	if r, _ := c.exec(id2, "", "sh", "-c", "echo again > /workspace/g && cat /workspace/g"); r.Stdout != "again\n" {
		t.Errorf("a new session on the workspace: %+v", r)
	}
	c.ok("session", "destroy", id2)
}

// waitOpenBy waits until process pid has a descriptor of the file f has
// open: a state the process does not announce, so it is polled, with a
// deadline.
func waitOpenBy(t *testing.T, pid int, f *os.File) {
	t.Helper()
	want, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if st, err := os.Stat(filepath.Join(dir, fd.Name())); err == nil && os.SameFile(st, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never opened %s", pid, f.Name())
		}
	}
}

// TestRealmctlSingleOwner: one realmctl owns a state dir at a time. A second
// one waits for the lock and fails clearly when it is not released in
// time; two creates at once both succeed, one after the other, and leave
// two valid records on one mount.
func TestRealmctlSingleOwner(t *testing.T) {
	c := newCtl(t)
	os.MkdirAll(c.stateDir, 0o700)
	f, err := os.OpenFile(filepath.Join(c.stateDir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, stderr, code := c.run("--lock-wait", "1s", "reap")
	if code != 1 || !strings.Contains(stderr, "another realmctl") {
		t.Errorf("reap while locked: exit %d, stderr %q; want 1 and a clear message", code, stderr)
	}
	if time.Since(start) < time.Second {
		t.Errorf("gave up after %s, without waiting", time.Since(start))
	}
	cmd := c.cmd("--lock-wait", "20s", "reap")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitOpenBy(t, cmd.Process.Pid, f) // the reap is waiting for the lock
	f.Close()                         // release
	if err := cmd.Wait(); err != nil {
		t.Errorf("reap waiting for the lock: %v", err)
	}

	ws := workspace(t)
	var wg sync.WaitGroup
	ids := make([]string, 2)
	codes := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _, code := c.run("--lock-wait", "60s", "session", "create", "--workspace", ws)
			ids[i], codes[i] = strings.TrimSpace(out), code
		}()
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 || ids[0] == ids[1] {
		t.Fatalf("concurrent creates: exits %v, ids %v", codes, ids)
	}
	for _, id := range ids {
		if rec := c.record(id); rec["state"] != "active" {
			t.Errorf("record %s: %v", id, rec)
		}
	}
	if mnts := c.realmfsMounts(); len(mnts) != 1 {
		t.Errorf("mounts %v, want one shared", mnts)
	}
	for _, id := range ids {
		c.ok("session", "destroy", id)
	}
}

// TestRealmctlPodmanOnlyHost: with no OpenShell CLI on the host, create,
// reap, list and destroy of a Podman session never ask for one; global
// flags work after the subcommand.
func TestRealmctlPodmanOnlyHost(t *testing.T) {
	if p, err := exec.LookPath("openshell"); err == nil {
		t.Skipf("an openshell CLI is on PATH (%s): not a Podman-only host", p)
	}
	c := newCtl(t)
	id := c.create(workspace(t))
	out := c.ok("reap", "-o", "json")
	if !strings.Contains(out, `"recordsDeleted":0`) {
		t.Errorf("reap with a live session: %s", out)
	}
	out = c.ok("session", "exec", "-o", "json", id, "--", "/bin/sh", "-c", "cat /workspace/nothing-here; echo -o json")
	var r execResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Stdout != "-o json\n" || r.ExitCode != 0 {
		t.Errorf("exec -o json after the subcommand printed %q (%v)", out, err)
	}
	if out := c.ok("session", "list", "-o", "json"); !strings.Contains(out, id) {
		t.Errorf("session list: %s", out)
	}
	c.ok("session", "destroy", id)
}
