package fdbudget

import "github.com/realm-dev/realm/locks"

// HandlesByOwner is how many handles each owner holds now (realmfs
// status); nil when nothing is counted (no bound: Bounded).
func (c *Counts) HandlesByOwner() map[locks.Owner]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners == nil {
		return nil
	}
	out := map[locks.Owner]int{}
	for _, o := range c.owners {
		out[o]++
	}
	return out
}
