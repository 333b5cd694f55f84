// Command hashsync: synchronize sparse gradients among ranks with Zen's balanced parallelism (hierarchical hashing, hash bitmap) and the baseline schemes.
//
// Synopsis:
//
//	hashsync COMMAND [FLAGS]
//
// Run "hashsync --help" for the commands and "hashsync COMMAND --help" for each one's
// flags; docs/hashsync.md is the manual.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
