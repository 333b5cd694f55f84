// Command fuser: plan which consecutive gradients to fuse before compression and communication (Cupcake), against bucket baselines.
//
// Synopsis:
//
//	fuser COMMAND [FLAGS]
//
// Run "fuser --help" for the commands and "fuser COMMAND --help" for each one's
// flags; docs/fuser.md is the manual.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
