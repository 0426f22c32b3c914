// Package profiling writes a program's CPU, mutex, blocking and allocation
// profiles for the benchmarks (docs/PERFORMANCE.md): where a workload's
// time goes, where the program serialises, and what it allocates (the
// collector's work and the fresh pages the heap faults in). realmfs starts
// it in test builds only (the tag realmtest).
package profiling

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// Start profiles the CPU into the file cpu and, from now on, every mutex
// contention and blocking event, written at the end to mutex and
// mutex.block, and every allocation since the program started, written at
// the end to allocs (Go samples one in 512 KiB; "": not that one). The
// returned function stops and writes them. The files are made mode 0600
// (less what the umask takes).
func Start(cpu, mutex, allocs string) (stop func()) {
	var cpuFile *os.File
	if cpu != "" {
		if f, err := create(cpu); err == nil && pprof.StartCPUProfile(f) == nil {
			cpuFile = f
		} else if err == nil {
			f.Close()
		}
	}
	if mutex != "" {
		runtime.SetMutexProfileFraction(1)
		runtime.SetBlockProfileRate(1)
	}
	return func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		paths := map[string]string{"allocs": allocs}
		if mutex != "" {
			paths["mutex"], paths["block"] = mutex, mutex+".block"
		}
		for name, path := range paths {
			if path == "" {
				continue
			}
			if f, err := create(path); err == nil {
				pprof.Lookup(name).WriteTo(f, 0)
				f.Close()
			}
		}
	}
}

// create makes path anew, mode 0600.
func create(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
}
