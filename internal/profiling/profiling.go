// Package profiling writes a program's CPU, mutex and blocking profiles
// for the benchmarks (docs/PERFORMANCE.md): where a workload's time goes,
// and where the program serialises. realmfs starts it in test builds only
// (the tag realmtest).
package profiling

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// Start profiles the CPU into the file cpu and, from now on, every mutex
// contention and blocking event, written at the end to mutex and
// mutex.block ("": not that one). The returned function stops and writes
// them. The files are made mode 0600 (less what the umask takes).
func Start(cpu, mutex string) (stop func()) {
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
		if mutex == "" {
			return
		}
		for name, path := range map[string]string{"mutex": mutex, "block": mutex + ".block"} {
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
