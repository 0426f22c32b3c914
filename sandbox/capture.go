package sandbox

import "sync"

// BoundedBuffer is an io.Writer that keeps the first Limit bytes written to it
// and drains the rest, remembering that it did. A command that prints a
// gigabyte therefore costs realmctl at most Limit bytes of memory, and the
// writer never fails, so the child is never blocked or killed by a full pipe.
type BoundedBuffer struct {
	Limit int

	mu        sync.Mutex
	buf       []byte
	truncated bool
}

// NewBoundedBuffer returns a buffer that keeps at most limit bytes.
func NewBoundedBuffer(limit int) *BoundedBuffer {
	return &BoundedBuffer{Limit: limit}
}

// Write keeps what fits and reports the whole of p as written.
func (b *BoundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.Limit - len(b.buf)
	if room < 0 {
		room = 0
	}
	if len(p) > room {
		b.truncated = true
		b.buf = append(b.buf, p[:room]...)
	} else {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

// String returns the kept bytes.
func (b *BoundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Truncated reports whether anything was dropped.
func (b *BoundedBuffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.truncated
}
