// Command ckpt: keep checkpoints in peers' CPU memory with Gemini's placement, persist and prune them from cron, and recover.
//
// Synopsis:
//
//	ckpt COMMAND [FLAGS]
//
// Run "ckpt --help" for the commands and "ckpt COMMAND --help" for each one's
// flags; docs/ckpt.md is the manual.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
