// Command straggle: straggler-tolerant gradient synchronization (RNA) next to blocking allreduce and random-group partial allreduce.
//
// Synopsis:
//
//	straggle COMMAND [FLAGS]
//
// Run "straggle --help" for the commands and "straggle COMMAND --help" for each one's
// flags; docs/straggle.md is the manual.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
