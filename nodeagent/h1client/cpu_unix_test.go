//go:build unix

package h1client

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time this process has used; false
// when the system does not say.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
