package dispatch

import (
	"testing"
	"unsafe"
)

// A Lease lives as long as its request, a held stream's included; its
// fields fit the 256 B size class (280 B, in the 288 B class, before
// they were ordered by size).
func TestLeaseFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Lease{}); n > 256 {
		t.Fatalf("Lease is %d B, want at most 256", n)
	}
}
