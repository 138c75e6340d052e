package nodeagent

import (
	"net"
	"testing"
)

// edge. is edge, fully qualified: listed beside edge it is the same entry
// (one session, one budget), not a second name following the same edge.
func TestEdgeNameWithTrailingDotIsTheSameEntry(t *testing.T) {
	listedTwiceSpendsOneBudget(t, func(port string) []string {
		return []string{net.JoinHostPort("edge.test.", port), net.JoinHostPort("edge.test", port)}
	})
	for _, tc := range []struct{ a, b string }{
		{"edge.:7000", "edge:7000"},
		{"Edge.Test.:07000", "edge.test:7000"},
	} {
		if x, y := edgeKey(tc.a), edgeKey(tc.b); x != y {
			t.Errorf("edgeKey(%q) = %q, edgeKey(%q) = %q; want one key", tc.a, x, tc.b, y)
		}
	}
}
