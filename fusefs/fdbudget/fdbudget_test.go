package fdbudget

import (
	"testing"

	"github.com/realm-dev/realm/locks"
)

// TestAdmit: the budget's arithmetic. An owner may take need more while
// it stays under the per-owner bound and under half of what the other
// owners left of the pool.
func TestAdmit(t *testing.T) {
	tests := []struct {
		name                              string
		held, total, need, perOwner, pool int
		want                              Refusal
	}{
		{"no bounds", 1 << 20, 1 << 21, 1, 0, 0, None},
		{"under the per-owner bound", 9, 9, 1, 10, 0, None},
		{"at the per-owner bound", 10, 10, 1, 10, 0, PerOwner},
		{"a write's need past the per-owner bound", 5, 5, 6, 10, 0, PerOwner},
		{"alone, up to half the pool", 499, 499, 1, 0, 1000, None},
		{"alone, past half the pool", 500, 500, 1, 0, 1000, Share},
		{"second owner: half of what the first left", 249, 749, 1, 0, 1000, None},
		{"second owner past it", 250, 750, 1, 0, 1000, Share},
		{"newcomer after two greedy owners finds room", 0, 750, 1, 0, 1000, None},
		{"newcomer after three", 0, 875, 1, 0, 1000, None},
		{"the pool taken whole: no room", 0, 1000, 1, 0, 1000, Share},
		{"the per-owner bound first", 10, 10, 1, 10, 1000, PerOwner},
		{"owner shrinking its holding is below both", 100, 600, 1, 200, 1000, None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := admit(tt.held, tt.total, tt.need, tt.perOwner, tt.pool); got != tt.want {
				t.Errorf("admit(held %d, total %d, need %d, perOwner %d, pool %d) = %v, want %v",
					tt.held, tt.total, tt.need, tt.perOwner, tt.pool, got, tt.want)
			}
		})
	}
}

// TestPool: the reserve out of the daemon's limit, and the idle
// directory fds' bound, for limits small and large.
func TestPool(t *testing.T) {
	tests := []struct {
		limit, pool, dirs int
	}{
		{0, 0, 64},
		{1024, 512, 128},
		{4096, 4096 - (daemonFds + resolverFds + inFlightFds + 512), 512},
		{1 << 20, 1<<20 - (daemonFds + resolverFds + inFlightFds + 4096), 4096},
	}
	for _, tt := range tests {
		if got := Pool(tt.limit); got != tt.pool {
			t.Errorf("Pool(%d) = %d, want %d", tt.limit, got, tt.pool)
		}
		if got := DirFdBound(tt.limit); got != tt.dirs {
			t.Errorf("DirFdBound(%d) = %d, want %d", tt.limit, got, tt.dirs)
		}
	}
}

// TestCountsBurst: charges and releases of several owners; a refused
// owner's burst is audited once, and a new burst starts once it could
// take one more.
func TestCountsBurst(t *testing.T) {
	c := &Counts{pool: 100}
	a, b := locks.Owner("a"), locks.Owner("b")
	if rule, _ := c.Take(a, 50, 50); rule != None {
		t.Fatalf("a taking half the pool: %v", rule)
	}
	rule, first := c.Take(a, 1, 1)
	if rule != Share || !first {
		t.Errorf("a past half the pool: %v first %v, want %v first", rule, first, Share)
	}
	if _, first := c.Take(a, 1, 1); first {
		t.Errorf("a's second refusal is the first of a burst")
	}
	if rule, _ := c.Take(b, 25, 25); rule != None {
		t.Errorf("b taking half of what a left: %v", rule)
	}
	if rule, _ := c.Take(b, 1, 1); rule != Share {
		t.Errorf("b past half of what a left: %v", rule)
	}
	c.Release(a, 1) // b's 25 leave a 37: still over
	if rule, _ := c.Take(a, 1, 0); rule != Share {
		t.Errorf("a over half of what b left: %v", rule)
	}
	c.Release(a, 13)
	if rule, first := c.Take(a, 1, 0); rule != None || first {
		t.Errorf("a after releases: %v first %v", rule, first)
	}
	c.Release(a, 36)
	c.Release(a, 5) // more than held: nothing
	if c.total != 25 || c.held[a] != 0 || len(c.held) != 1 {
		t.Errorf("after a released all: total %d, held %v", c.total, c.held)
	}
	if rule, first := c.Take(a, 100, 100); rule != Share || !first {
		t.Errorf("a's refusal after its burst ended: %v first %v, want a new burst", rule, first)
	}
}
