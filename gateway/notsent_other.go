//go:build !linux

package gateway

import "net"

// boundUnsent is a no-op off Linux: there the per-write deadline measures
// the kernel's own wake-up threshold (see notsent_linux.go).
func boundUnsent(net.Conn) {}
