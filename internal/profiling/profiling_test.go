package profiling

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestStart: each profile asked for is written (gzipped protocol buffers,
// as pprof reads them); none asked for, no file.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	cpu, mutex, allocs := filepath.Join(dir, "cpu"), filepath.Join(dir, "mutex"), filepath.Join(dir, "allocs")
	stop := Start(cpu, mutex, allocs)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				mu.Lock()
				for i := 0; i < 200; i++ {
					_ = i * i
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop()
	for _, path := range []string{cpu, mutex, mutex + ".block", allocs} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: %d bytes, not a gzipped profile", path, len(b))
		}
	}

	none := t.TempDir()
	t.Chdir(none)
	Start("", "", "")()
	if ents, _ := os.ReadDir(none); len(ents) != 0 {
		t.Errorf("profiles written though none was asked for: %v", ents)
	}
}
