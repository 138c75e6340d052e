package nodeagent

import (
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
)

// Two entries of edge.addresses that reach one ip:port (two names, a name
// and the address, or an address listed twice) give the node one session
// with that edge, not two superseding each other every reconnect
// interval.
func TestEdgeReachedByTwoEntriesGetsOneSession(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries func(port string) []string
	}{
		{"two names", func(port string) []string {
			return []string{net.JoinHostPort("edge.test", port), net.JoinHostPort("edge-alias.test", port)}
		}},
		{"a name and its address", func(port string) []string {
			return []string{net.JoinHostPort("edge.test", port), net.JoinHostPort("127.0.0.2", port)}
		}},
		{"an address and a name for it", func(port string) []string {
			return []string{net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("edge.test", port)}
		}},
		{"an address twice", func(port string) []string {
			return []string{net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("127.0.0.2", port)}
		}},
		{"an address twice, spelt two ways", func(port string) []string {
			return []string{net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("::ffff:127.0.0.2", port)}
		}},
		{"a name twice", func(port string) []string {
			return []string{net.JoinHostPort("edge.test", port), net.JoinHostPort("edge.test", port)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { oneSessionForEntries(t, tc.entries) })
	}
}

// oneSessionForEntries runs RunEdges for the entries made of an edge's
// port (the edge listens on 127.0.0.2; edge.test and edge-alias.test
// resolve to it) and fails unless the node keeps one session with it.
func oneSessionForEntries(t *testing.T, entries func(port string) []string) {
	t.Helper()
	edges, port := edgesOnOnePort(t, "127.0.0.2")
	fe := edges[0]
	newMovableDNS(t, "127.0.0.2")
	done, stop := runEntries(t, dnsPolicy(0), entries(port), newTestAgent(t), zap.NewNop())
	readyOrStopped(t, fe, done)
	// A second session would register at once and again every
	// reconnect interval as each supersedes the other.
	time.Sleep(50 * dnsPolicy(0).Interval)
	if got := fe.registrations(); got != 1 {
		t.Fatalf("%d registrations with the edge, want 1 (one session)", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}
