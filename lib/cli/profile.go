package cli

import (
	"os"
	"runtime/pprof"
)

// StartCPUProfile starts a Go CPU profile into path (the --cpu-profile of
// the verbs that move data: go tool pprof reads it) and returns what stops
// it and closes the file; with an empty path it does nothing.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
