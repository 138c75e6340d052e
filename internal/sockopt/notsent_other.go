//go:build !linux

package sockopt

import "net"

// BoundUnsent does nothing off Linux (see notsent_linux.go): there a
// per-write deadline measures the kernel's own wake-up threshold.
func BoundUnsent(net.Conn, int) {}

// Unsent is -1 off Linux.
func Unsent(net.Conn) int { return -1 }
