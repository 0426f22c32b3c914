package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Benchmarks compare a native directory with the mount, on the same
// filesystem. They measure; they assert nothing about speed. Run with
//
//	go test ./e2e -run '^$' -bench . -benchtime 2000x
//
// scripts/bench.sh is the full workload comparison (make bench).

// benchTargets returns the native dir and the mount's dir, both fresh.
func benchTargets(b *testing.B, opts ...MountOption) []struct{ name, dir string } {
	m := mount(b, opts...)
	native := filepath.Join(m.Root, "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		b.Fatal(err)
	}
	return []struct{ name, dir string }{{"native", native}, {"mount", m.Dir}}
}

func populate(b *testing.B, dir string, n int) []string {
	paths := make([]string, n)
	for i := range n {
		paths[i] = filepath.Join(dir, fmt.Sprintf("d%02d", i%16), fmt.Sprintf("f%05d", i))
		if err := os.MkdirAll(filepath.Dir(paths[i]), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(paths[i], make([]byte, 4096), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return paths
}

func BenchmarkStat(b *testing.B) {
	for _, tg := range benchTargets(b) {
		paths := populate(b, filepath.Join(tg.dir, "stat"), 1000)
		b.Run(tg.name, func(b *testing.B) {
			var st unix.Stat_t
			i := 0
			for b.Loop() {
				if err := unix.Lstat(paths[i%len(paths)], &st); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkCreate(b *testing.B) {
	for _, tg := range benchTargets(b) {
		dir := filepath.Join(tg.dir, "create")
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		data := make([]byte, 4096)
		b.Run(tg.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				p := filepath.Join(dir, fmt.Sprintf("f%07d", i))
				if err := os.WriteFile(p, data, 0o644); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.SetBytes(int64(len(data)))
		})
	}
}

func BenchmarkReadSmall(b *testing.B) {
	for _, tg := range benchTargets(b) {
		paths := populate(b, filepath.Join(tg.dir, "read"), 1000)
		b.Run(tg.name, func(b *testing.B) {
			buf := make([]byte, 4096)
			i := 0
			for b.Loop() {
				f, err := os.Open(paths[i%len(paths)])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Read(buf); err != nil {
					b.Fatal(err)
				}
				f.Close()
				i++
			}
			b.SetBytes(4096)
		})
	}
}

func BenchmarkReaddir(b *testing.B) {
	for _, tg := range benchTargets(b) {
		dir := filepath.Join(tg.dir, "list")
		populate(b, dir, 1000)
		b.Run(tg.name, func(b *testing.B) {
			for b.Loop() {
				entries, err := os.ReadDir(filepath.Join(dir, "d07"))
				if err != nil || len(entries) == 0 {
					b.Fatal(len(entries), err)
				}
			}
		})
	}
}

func BenchmarkCreateUnlink(b *testing.B) {
	for _, tg := range benchTargets(b) {
		dir := filepath.Join(tg.dir, "churn")
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		b.Run(tg.name, func(b *testing.B) {
			p := filepath.Join(dir, "f")
			for b.Loop() {
				if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
					b.Fatal(err)
				}
				if err := os.Remove(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStatGuard measures what the credential guard adds to a stat: the
// same lstat storm on a mount with the default policy and on one whose
// policy has no globs. With the kernel's cache off, every lstat of
// a/b/c/dNN/fNNNNN is five LOOKUPs answered by the daemon, so the difference
// is the guard's own work (the path and the matcher, for the file), which
// BenchmarkLookupGuard in ./fusefs measures alone:
//
//	go test ./e2e -run '^$' -bench StatGuard -count 10 -benchtime 20000x
func BenchmarkStatGuard(b *testing.B) {
	noGlobs := writePolicy(b, "version: 1\ncredentials:\n  defaults: false\n")
	cacheOff := Opts("entry_timeout=0,attr_timeout=0")
	for _, tc := range []struct {
		name string
		opts []MountOption
	}{
		{"default-policy", []MountOption{cacheOff}},
		{"no-globs", []MountOption{cacheOff, Flags("--policy", noGlobs)}},
	} {
		m := mount(b, tc.opts...)
		paths := populate(b, m.Path("a", "b", "c"), 1000)
		b.Run(tc.name, func(b *testing.B) {
			var st unix.Stat_t
			i := 0
			for b.Loop() {
				if err := unix.Lstat(paths[i%len(paths)], &st); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
