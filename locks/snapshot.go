package locks

// Held is one owner's hold of one file, as the table has it now.
type Held struct {
	Key    Key
	Owner  Owner
	Write  bool // a Write lease among its leases (else Append only)
	Leases int
	Entry  *Entry // its Value is the caller's (lock it to read)
}

// Holds lists every hold of the table (realmfs status), in no order.
func (t *Table) Holds() []Held {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Held
	for k, es := range t.entries {
		for _, e := range es {
			out = append(out, Held{Key: k, Owner: e.owner, Write: e.writes > 0, Leases: e.refs, Entry: e})
		}
	}
	return out
}
