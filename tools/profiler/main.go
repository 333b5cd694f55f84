// Command profiler: read training traces of every vintage (Kineto, legacy autograd profiler, Horovod, BytePS), analyse them like Holistic Trace Analysis, and emit the timing model the planners read.
//
// Synopsis:
//
//	profiler COMMAND [FLAGS]
//
// Run "profiler --help" for the commands and "profiler COMMAND --help" for each one's
// flags; docs/profiler.md is the manual.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
