// Package makers is the journal's table of fresh objects: which owner
// made each object that no other owner has changed since. It is bounded
// in objects and in owners, and it holds no pointer per object (an
// object maps to its maker's number), so that the garbage collector has
// nothing to scan in its tens of thousands of entries and noting a
// maker allocates nothing once the maker is numbered.
//
// A Table is not safe for concurrent use: the journal holds it under its
// mutex.
package makers

// Owner is who makes an object: the owner as the audit log names it and
// the incarnation of it (a session id given again is another owner).
type Owner struct{ Name, Start string }

// Table maps objects, by key, to their makers.
type Table[K comparable] struct {
	made       map[K]uint32
	owners     map[Owner]uint32 // numbers from 1: 0 is no owner's
	maxObjects int
	maxOwners  int
}

// New is a table of at most maxObjects objects and maxOwners owners.
func New[K comparable](maxObjects, maxOwners int) *Table[K] {
	return &Table[K]{made: map[K]uint32{}, owners: map[Owner]uint32{}, maxObjects: maxObjects, maxOwners: maxOwners}
}

// Made notes k made by o. Past maxObjects one object (any) is forgotten;
// past maxOwners every object is, and the numbering starts again, so
// that no number given again leads a new owner to an older one's object.
func (t *Table[K]) Made(k K, o Owner) {
	n, ok := t.owners[o]
	if !ok {
		if len(t.owners) >= t.maxOwners {
			clear(t.made)
			clear(t.owners)
		}
		n = uint32(len(t.owners) + 1)
		t.owners[o] = n
	}
	if _, ok := t.made[k]; !ok && len(t.made) >= t.maxObjects {
		for old := range t.made { // any one
			delete(t.made, old)
			break
		}
	}
	t.made[k] = n
}

// Forget forgets k.
func (t *Table[K]) Forget(k K) { delete(t.made, k) }

// MadeBy reports whether k is in the table (made) and whether o made it.
func (t *Table[K]) MadeBy(k K, o Owner) (made, by bool) {
	n, made := t.made[k]
	return made, made && n == t.owners[o]
}

// Len is how many objects the table holds.
func (t *Table[K]) Len() int { return len(t.made) }
