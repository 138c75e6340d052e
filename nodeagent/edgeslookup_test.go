package nodeagent

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
)

// A DNS lookup that never answers is bounded as a handshake is, and
// counts as a failed attempt: the budget runs out instead of the node
// waiting on the resolver for ever.
func TestEdgeLookupThatHangsIsBounded(t *testing.T) {
	old := lookupHost
	lookupHost = func(ctx context.Context, host string) ([]string, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	t.Cleanup(func() { lookupHost = old })
	policy := dnsPolicy(2)
	policy.Dial.HandshakeTimeout = 50 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		done <- RunEdges(context.Background(), policy, []string{"edge.test:7070"}, true, newTestAgent(t), zap.NewNop())
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrAttemptsExhausted) || !errors.Is(err, ErrNoEdge) {
			t.Fatalf("err = %v, want exhaustion of a name that does not resolve", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges still waits on a lookup that never answers")
	}
}

// A name that resolves to no address at all is a failed lookup, not an
// edge with nothing to dial that RunEdges quietly drops.
func TestEdgeNameWithNoAddressIsAFailure(t *testing.T) {
	lookups := stubDNS(t, func(int) ([]string, error) { return nil, nil })
	err := RunEdges(context.Background(), dnsPolicy(2), []string{"edge.test:7070"}, true, newTestAgent(t), zap.NewNop())
	if !errors.Is(err, ErrAttemptsExhausted) || !errors.Is(err, ErrNoEdge) {
		t.Fatalf("err = %v, want exhaustion of a name with no address", err)
	}
	if got := lookups.Load(); got != 2 {
		t.Fatalf("%d lookups, want 2", got)
	}
}

// Without resolve, a name is dialled as given: the node's own lookup is
// not used.
func TestEdgeNameDialledAsGivenWithoutResolve(t *testing.T) {
	fe := startFakeEdge(t, mockPayload(1), nil)
	_, port, _ := net.SplitHostPort(fe.addr)
	lookups := stubDNS(t, func(int) ([]string, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "localhost", IsNotFound: true}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunEdges(ctx, dnsPolicy(0), []string{net.JoinHostPort("localhost", port)}, false, newTestAgent(t), zap.NewNop())
	}()
	select {
	case <-fe.conns:
	case err := <-done:
		t.Fatalf("RunEdges returned %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no node became ready")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
	if n := lookups.Load(); n != 0 {
		t.Fatalf("%d lookups through the node's resolver without resolve", n)
	}
}
