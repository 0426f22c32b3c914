package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/locks"
)

func callerCtx(pid uint32) context.Context {
	return &fuse.Context{Caller: fuse.Caller{Pid: pid}}
}

// TestDescriptorBound: an owner holding its bound of handles is refused
// (EMFILE), audited once per burst, while another owner is not; a release
// lets it open again, and its next refusal is a new burst.
func TestDescriptorBound(t *testing.T) {
	tf := newTestFS(t, func(o *Options) { o.MaxFdsPerOwner = 2 })
	a, b := callerCtx(100), callerCtx(200)
	ownerA := locks.Owner("pid:100") // Options.Owners nil: each process owns
	for i := range uint64(2) {
		if errno := tf.admitOpen(a, "", "open", tf.root, "f", 1); errno != 0 {
			t.Fatalf("open %d of owner A below its bound: %v", i, errno)
		}
		tf.fds.opened(fhKey{fh: i}, ownerA)
	}
	for range 3 {
		if errno := tf.admitOpen(a, "", "open", tf.root, "f", 1); errno != syscall.EMFILE {
			t.Errorf("owner A past its bound: %v, want EMFILE", errno)
		}
	}
	if errno := tf.admitOpen(b, "", "open", tf.root, "f", 1); errno != 0 {
		t.Errorf("owner B while A is at its bound: %v", errno)
	}
	tf.wantAudit(t, "open RESOURCE_LIMIT EMFILE")
	tf.fds.released(fhKey{fh: 0})
	tf.fds.released(fhKey{dir: true, fh: 1}) // another kind of handle: not A's
	if errno := tf.admitOpen(a, "", "open", tf.root, "f", 1); errno != 0 {
		t.Errorf("owner A after a release: %v", errno)
	}
	tf.fds.opened(fhKey{fh: 0}, ownerA)
	if errno := tf.admitOpen(a, "", "opendir", tf.root, "", 1); errno != syscall.EMFILE {
		t.Errorf("owner A at its bound again: %v, want EMFILE", errno)
	}
	tf.wantAudit(t, "open RESOURCE_LIMIT EMFILE", "opendir RESOURCE_LIMIT EMFILE")
}

// TestDirectoryMovedOut: a directory node whose fd was opened while it was
// in BACKING is ESTALE, audited PATH_ESCAPE, once the host has moved it
// out, and the mount's again once moved back.
func TestDirectoryMovedOut(t *testing.T) {
	tf := newTestFS(t, nil)
	if err := os.MkdirAll(filepath.Join(tf.backing, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tf.write(t, "d/f", "inside")
	d := tf.lookup(t, "d")
	ctx := callerCtx(1)
	var out fuse.EntryOut
	if _, errno := d.Lookup(ctx, "f", &out); errno != 0 {
		t.Fatalf("lookup d/f: %v", errno)
	}
	outside := filepath.Join(t.TempDir(), "d")
	if err := os.Rename(filepath.Join(tf.backing, "d"), outside); err != nil {
		t.Fatal(err)
	}
	if _, errno := d.Lookup(ctx, "f", &out); errno != syscall.ESTALE {
		t.Errorf("lookup d/f with d moved out: %v, want ESTALE", errno)
	}
	if _, _, _, errno := d.Create(ctx, "g", uint32(os.O_WRONLY|os.O_CREATE), 0o644, &out); errno != syscall.ESTALE {
		t.Errorf("create d/g with d moved out: %v, want ESTALE", errno)
	}
	if _, err := os.Lstat(filepath.Join(outside, "g")); !os.IsNotExist(err) {
		t.Errorf("d/g was made outside BACKING: %v", err)
	}
	tf.wantAudit(t, "opendir PATH_ESCAPE ESTALE", "opendir PATH_ESCAPE ESTALE")
	if err := os.Rename(outside, filepath.Join(tf.backing, "d")); err != nil {
		t.Fatal(err)
	}
	if _, errno := d.Lookup(ctx, "f", &out); errno != 0 {
		t.Errorf("lookup d/f with d moved back: %v", errno)
	}
}

// TestFdAdmit: the budget's arithmetic. An owner may take need more while
// it stays under the per-owner bound and under half of what the other
// owners left of the pool.
func TestFdAdmit(t *testing.T) {
	tests := []struct {
		name                              string
		held, total, need, perOwner, pool int
		want                              string
	}{
		{"no bounds", 1 << 20, 1 << 21, 1, 0, 0, ""},
		{"under the per-owner bound", 9, 9, 1, 10, 0, ""},
		{"at the per-owner bound", 10, 10, 1, 10, 0, RuleResourceLimit},
		{"a write's need past the per-owner bound", 5, 5, 6, 10, 0, RuleResourceLimit},
		{"alone, up to half the pool", 499, 499, 1, 0, 1000, ""},
		{"alone, past half the pool", 500, 500, 1, 0, 1000, RuleFdBudget},
		{"second owner: half of what the first left", 249, 749, 1, 0, 1000, ""},
		{"second owner past it", 250, 750, 1, 0, 1000, RuleFdBudget},
		{"newcomer after two greedy owners finds room", 0, 750, 1, 0, 1000, ""},
		{"newcomer after three", 0, 875, 1, 0, 1000, ""},
		{"the pool taken whole: no room", 0, 1000, 1, 0, 1000, RuleFdBudget},
		{"the per-owner bound first", 10, 10, 1, 10, 1000, RuleResourceLimit},
		{"owner shrinking its holding is below both", 100, 600, 1, 200, 1000, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fdAdmit(tt.held, tt.total, tt.need, tt.perOwner, tt.pool); got != tt.want {
				t.Errorf("fdAdmit(held %d, total %d, need %d, perOwner %d, pool %d) = %q, want %q",
					tt.held, tt.total, tt.need, tt.perOwner, tt.pool, got, tt.want)
			}
		})
	}
}

// TestFdPool: the reserve out of the daemon's limit, and the idle
// directory fds' bound, for limits small and large.
func TestFdPool(t *testing.T) {
	tests := []struct {
		limit, pool, dirs int
	}{
		{0, 0, 64},
		{1024, 512, 128},
		{4096, 4096 - (daemonFds + resolverFds + inFlightFds + 512), 512},
		{1 << 20, 1<<20 - (daemonFds + resolverFds + inFlightFds + 4096), 4096},
	}
	for _, tt := range tests {
		if got := fdPool(tt.limit); got != tt.pool {
			t.Errorf("fdPool(%d) = %d, want %d", tt.limit, got, tt.pool)
		}
		if got := dirFdBound(tt.limit); got != tt.dirs {
			t.Errorf("dirFdBound(%d) = %d, want %d", tt.limit, got, tt.dirs)
		}
	}
}

// TestFdCountsBurst: charges and releases of several owners; a refused
// owner's burst is audited once, and a new burst starts once it could
// take one more.
func TestFdCountsBurst(t *testing.T) {
	c := &fdCounts{pool: 100}
	a, b := locks.Owner("a"), locks.Owner("b")
	if rule, _ := c.take(a, 50, 50); rule != "" {
		t.Fatalf("a taking half the pool: %q", rule)
	}
	rule, first := c.take(a, 1, 1)
	if rule != RuleFdBudget || !first {
		t.Errorf("a past half the pool: %q first %v, want %q first", rule, first, RuleFdBudget)
	}
	if _, first := c.take(a, 1, 1); first {
		t.Errorf("a's second refusal is the first of a burst")
	}
	if rule, _ := c.take(b, 25, 25); rule != "" {
		t.Errorf("b taking half of what a left: %q", rule)
	}
	if rule, _ := c.take(b, 1, 1); rule != RuleFdBudget {
		t.Errorf("b past half of what a left: %q", rule)
	}
	c.release(a, 1) // b's 25 leave a 37: still over
	if rule, _ := c.take(a, 1, 0); rule != RuleFdBudget {
		t.Errorf("a over half of what b left: %q", rule)
	}
	c.release(a, 13)
	if rule, first := c.take(a, 1, 0); rule != "" || first {
		t.Errorf("a after releases: %q first %v", rule, first)
	}
	c.release(a, 36)
	c.release(a, 5) // more than held: nothing
	if c.total != 25 || c.held[a] != 0 || len(c.held) != 1 {
		t.Errorf("after a released all: total %d, held %v", c.total, c.held)
	}
	if rule, first := c.take(a, 100, 100); rule != RuleFdBudget || !first {
		t.Errorf("a's refusal after its burst ended: %q first %v, want a new burst", rule, first)
	}
}
