package lockorder

import "testing"

// The cost of a Lock/Unlock pair: sync's in an ordinary build, the
// checker's under the tag lockdep (a held lock under another).

func BenchmarkLockUnlock(b *testing.B) {
	var o Mutex[NsMu]
	var i Mutex[NodeMu]
	n := 0
	for b.Loop() {
		o.Lock()
		i.Lock()
		n++
		i.Unlock()
		o.Unlock()
	}
}

func BenchmarkParallel(b *testing.B) {
	var i Mutex[NodeMu]
	n := 0
	b.RunParallel(func(pb *testing.PB) {
		var o Mutex[NsMu]
		for pb.Next() {
			o.Lock()
			i.Lock()
			n++
			i.Unlock()
			o.Unlock()
		}
	})
}

// BenchmarkDeep is BenchmarkLockUnlock 30 frames down, as a request is.
func BenchmarkDeep(b *testing.B) {
	var o Mutex[NsMu]
	var i Mutex[NodeMu]
	n := 0
	var rec func(depth int)
	rec = func(depth int) {
		if depth > 0 {
			rec(depth - 1)
			return
		}
		for b.Loop() {
			o.Lock()
			i.Lock()
			n++
			i.Unlock()
			o.Unlock()
		}
	}
	rec(30)
}
