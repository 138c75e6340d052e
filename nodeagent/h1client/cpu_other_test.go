//go:build !unix

package h1client

import "time"

// processCPU is unknown here (no getrusage): the benchmarks leave out
// their cpu-ns/op figure.
func processCPU() (time.Duration, bool) { return 0, false }
