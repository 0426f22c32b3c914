// Package seqtable is a table keyed by a journal's change seqs: values by
// seq in runs of consecutive seqs, not in a hash map. The journal notes
// something of every removal under the seq it just took (the next one),
// and drops it again in seq order as its bounds prune; a map hashes each
// seq to anywhere in its table, and between two requests that table is out
// of the CPU's caches: a Go map's insert was a microsecond of an rm -rf's
// removal (docs/PERFORMANCE.md). Here consecutive seqs share a chunk.
// It is pure: no lock (its user holds one: even Load moves its cache),
// no system call.
package seqtable

// chunkBits: a chunk holds the values of 1<<chunkBits consecutive seqs.
const chunkBits = 8

const chunkLen = 1 << chunkBits

type chunk[V any] struct {
	has  [chunkLen / 64]uint64 // which slots hold a value
	n    int                   // how many
	vals [chunkLen]V
}

// Table maps seqs to values of type V. The zero Table is empty. Its memory
// is a chunk (256 values) for each run of 256 seqs that holds a value, and
// an entry in a map of chunks for each: a few dozen for the tens of
// thousands of seqs a journal's kept/ holds, so that map stays in the
// caches where a map of every seq would not. Any seqs may be held
// together, however far apart.
type Table[V any] struct {
	chunks  map[uint64]*chunk[V]
	last    *chunk[V] // the chunk used last, most often the next seq's
	lastNum uint64
	n       int
}

// Len is how many seqs hold a value.
func (t *Table[V]) Len() int { return t.n }

// Store sets seq's value.
func (t *Table[V]) Store(seq uint64, v V) {
	num := seq >> chunkBits
	c := t.chunk(num)
	if c == nil {
		c = new(chunk[V])
		if t.chunks == nil {
			t.chunks = map[uint64]*chunk[V]{}
		}
		t.chunks[num] = c
		t.last, t.lastNum = c, num
	}
	i := seq % chunkLen
	if w, b := i/64, uint64(1)<<(i%64); c.has[w]&b == 0 {
		c.has[w] |= b
		c.n++
		t.n++
	}
	c.vals[i] = v
}

// Load is seq's value, if it holds one.
func (t *Table[V]) Load(seq uint64) (V, bool) {
	var zero V
	c := t.chunk(seq >> chunkBits)
	if c == nil {
		return zero, false
	}
	i := seq % chunkLen
	if c.has[i/64]&(1<<(i%64)) == 0 {
		return zero, false
	}
	return c.vals[i], true
}

// Delete drops seq's value, and reports whether it held one.
func (t *Table[V]) Delete(seq uint64) bool {
	num := seq >> chunkBits
	c := t.chunk(num)
	if c == nil {
		return false
	}
	i := seq % chunkLen
	w, b := i/64, uint64(1)<<(i%64)
	if c.has[w]&b == 0 {
		return false
	}
	var zero V
	c.has[w] &^= b
	c.vals[i] = zero // no reference kept to what it held
	c.n--
	t.n--
	if c.n == 0 {
		delete(t.chunks, num)
		if t.last == c {
			t.last = nil
		}
	}
	return true
}

// chunk is chunk number num, nil if it holds nothing.
func (t *Table[V]) chunk(num uint64) *chunk[V] {
	if t.last != nil && t.lastNum == num {
		return t.last
	}
	c := t.chunks[num]
	if c != nil {
		t.last, t.lastNum = c, num
	}
	return c
}
