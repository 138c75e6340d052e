package stackbench

import (
	"strings"
	"testing"
)

// TestHeldStreamMemorySmoke runs the held-stream measurement with a few
// streams on every test run, so that it cannot rot while skipped (it is
// run by hand, with IOPBENCH_HELD in the thousands): it must complete and
// still attribute the edge's memory. It asserts no figure, only that the
// attribution finds what it is for: live heap under the edge's handler
// (none would mean the handler's frame, gin's Engine.ServeHTTP, is no
// longer recognised), sites named by iop's own frames, and the edge's
// goroutines by their pprof label.
func TestHeldStreamMemorySmoke(t *testing.T) {
	const n = 20
	h := heldStreamMemory33(t, n)
	if h.handler <= 0 {
		t.Fatalf("no live heap attributed to the edge's handler (%.0f B/stream)", h.handler)
	}
	own := false
	for _, s := range h.sites {
		own = own || strings.Contains(s.key, "gateway.")
	}
	if !own {
		t.Fatalf("no site under the edge's handler is named by a gateway frame: %v", h.sites)
	}
	if h.goroutines["edge"] <= 0 {
		t.Fatalf("no edge goroutine per held stream counted (%v): the pprof labels are not read", h.goroutines)
	}
}
