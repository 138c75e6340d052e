//go:build !linux

package cli

// Elsewhere there is no guard: a CLI's group outlives a node that dies
// without stopping it (on Linux, see guard_linux.go).
type groupGuard struct{}

func startGuard(int) (*groupGuard, error) { return nil, nil }

func (*groupGuard) stop() {}

// RunGuardIfAsked returns at once: there is no guard to run here.
func RunGuardIfAsked() {}
