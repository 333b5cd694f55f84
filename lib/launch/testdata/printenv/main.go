// Command printenv prints what launch.Detect finds in its environment as
// one JSON line on stdout, written with a single write so that the lines
// of processes sharing a pipe do not interleave. launch_integration_test.go
// runs it under real launchers. On error it prints the error to stderr and
// exits 1.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"trainwire.dev/lib/launch"
)

func main() {
	env, err := launch.Detect(os.Environ())
	if err != nil {
		fmt.Fprintln(os.Stderr, "printenv:", err)
		os.Exit(1)
	}
	line, err := json.Marshal(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "printenv:", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(append(line, '\n')); err != nil {
		os.Exit(1)
	}
}
