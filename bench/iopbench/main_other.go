//go:build !linux

package main

import (
	"fmt"
	"os"
)

// main says the benchmark cannot run here (see the package comment):
// built elsewhere, the command exists so that the module builds and vets
// on every system.
func main() {
	fmt.Fprintln(os.Stderr, "iopbench runs on Linux only (epoll, /proc, CPU affinity)")
	os.Exit(2)
}
