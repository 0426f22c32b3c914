package lockorder

import "testing"

func BenchmarkLockUnlock(b *testing.B) {
	var o Mutex[NsMu]
	var i Mutex[NodeMu]
	for b.Loop() {
		o.Lock()
		i.Lock()
		i.Unlock()
		o.Unlock()
	}
}

func BenchmarkParallel(b *testing.B) {
	var i Mutex[NodeMu]
	b.RunParallel(func(pb *testing.PB) {
		var o Mutex[NsMu]
		for pb.Next() {
			o.Lock()
			i.Lock()
			i.Unlock()
			o.Unlock()
		}
	})
}

// BenchmarkDeep is BenchmarkLockUnlock 30 frames down, as a request is.
func BenchmarkDeep(b *testing.B) {
	var o Mutex[NsMu]
	var i Mutex[NodeMu]
	var rec func(n int)
	rec = func(n int) {
		if n > 0 {
			rec(n - 1)
			return
		}
		for b.Loop() {
			o.Lock()
			i.Lock()
			i.Unlock()
			o.Unlock()
		}
	}
	rec(30)
}
