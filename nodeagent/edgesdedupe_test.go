package nodeagent

import (
	"context"
	"net"
	"sync"
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
		t.Run(tc.name, func(t *testing.T) {
			edges, port := edgesOnOnePort(t, "127.0.0.2")
			fe := edges[0]
			newMovableDNS(t, "127.0.0.2")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			// Owner: the test; stops at cancel.
			go func() {
				done <- RunEdges(ctx, dnsPolicy(0), tc.entries(port), true, newTestAgent(t), zap.NewNop())
			}()
			var once sync.Once
			stop := func() error {
				var err error
				once.Do(func() { cancel(); err = <-done })
				return err
			}
			t.Cleanup(func() { _ = stop() })
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
		})
	}
}
