// Command compressor: gradient-compression codecs with error feedback, and Espresso's compression-strategy planner.
//
// Synopsis:
//
//	compressor COMMAND [FLAGS]
//
// Run "compressor --help" for the commands and "compressor COMMAND --help" for each one's
// flags; docs/compressor.md is the manual.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
