package gateway

import (
	"testing"
	"unsafe"
)

// A tunnelExchange lives as long as its held stream; it fits the 288 B
// size class (304 B, in the 320 B class, while it kept a copy of its
// call's model).
func TestTunnelExchangeFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(tunnelExchange{}); n > 288 {
		t.Fatalf("tunnelExchange is %d B, want at most 288", n)
	}
}
