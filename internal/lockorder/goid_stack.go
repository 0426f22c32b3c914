//go:build lockdep && !amd64 && !arm64

package lockorder

import (
	"bytes"
	"runtime"
	"strconv"
)

// goid names the calling goroutine: its id, from the first line of its
// stack, "goroutine 18 [running]:". It costs a walk of the whole stack;
// amd64 and arm64 read the goroutine's g instead (goid_g.go).
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("lockorder: no goroutine id in " + strconv.Quote(string(buf[:])))
	}
	return id
}
