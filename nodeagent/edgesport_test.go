package nodeagent

import (
	"net"
	"testing"
)

// A port is one number however it is written (07000 and +7000 dial
// 7000, as config validation and the dialer read them): two entries
// reaching one edge that way give the node one session with it, not two
// superseding each other every reconnect interval.
func TestEdgePortSpeltTwoWaysGetsOneSession(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries func(port string) []string
	}{
		{"an address twice, with a leading zero", func(port string) []string {
			return []string{net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("127.0.0.2", "0"+port)}
		}},
		{"an address twice, with a plus sign", func(port string) []string {
			return []string{net.JoinHostPort("127.0.0.2", "+"+port), net.JoinHostPort("127.0.0.2", port)}
		}},
		{"a name with a leading zero and its address", func(port string) []string {
			return []string{net.JoinHostPort("edge.test", "00"+port), net.JoinHostPort("127.0.0.2", port)}
		}},
		{"two names, one with a leading zero", func(port string) []string {
			return []string{net.JoinHostPort("edge.test", port), net.JoinHostPort("edge-alias.test", "0"+port)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { oneSessionForEntries(t, tc.entries) })
	}
}

func TestEdgeKeySpellsOneSocketOneWay(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"10.0.0.1:7000", "10.0.0.1:07000"},
		{"10.0.0.1:7000", "10.0.0.1:+7000"},
		{"10.0.0.1:7000", "[::ffff:10.0.0.1]:7000"},
		{"edge:7000", "EDGE:0007000"},
	} {
		if x, y := edgeKey(tc.a), edgeKey(tc.b); x != y {
			t.Errorf("edgeKey(%q) = %q, edgeKey(%q) = %q; want one key", tc.a, x, tc.b, y)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"10.0.0.1:7000", "10.0.0.1:7001"},
		{"10.0.0.1:http", "10.0.0.1:80"}, // a service name is kept as written
		{"10.0.0.1:70000", "10.0.0.1:4464"},
	} {
		if x, y := edgeKey(tc.a), edgeKey(tc.b); x == y {
			t.Errorf("edgeKey(%q) = edgeKey(%q) = %q; want two keys", tc.a, tc.b, x)
		}
	}
}
