//go:build unix

package main

import "syscall"

// processCPU is the process's user and system time in nanoseconds (0 when
// unknown): plan reports it next to the wall time, which on a shared
// machine also measures the neighbours.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
