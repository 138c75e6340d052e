//go:build !linux

package cli

import "os"

// pipeCapacity cannot ask the pipe elsewhere; see defaultPipeCapacity.
func pipeCapacity(*os.File) int { return defaultPipeCapacity }
