package nodeagent

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// stubDNS makes lookupHost answer with answer(n) for the n-th lookup
// (0-based) for the rest of the test.
func stubDNS(t *testing.T, answer func(n int) ([]string, error)) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	old := lookupHost
	lookupHost = func(ctx context.Context, host string) ([]string, error) {
		return answer(int(n.Add(1)) - 1)
	}
	t.Cleanup(func() { lookupHost = old })
	return &n
}

func dnsPolicy(maxAttempts int) SupervisorConfig {
	return SupervisorConfig{
		Dial:   nodewire.DialConfig{HandshakeTimeout: 2 * time.Second},
		NodeID: "n1", Token: "tok",
		Interval: 10 * time.Millisecond, MaxAttempts: maxAttempts,
	}
}

// DNS that does not answer yet when the node starts is retried: the node
// connects once the name resolves, instead of exiting or leaving that
// edge out for the life of the process.
func TestEdgeNameThatResolvesLaterIsConnected(t *testing.T) {
	fe := startFakeEdge(t, mockPayload(1), nil)
	_, port, _ := net.SplitHostPort(fe.addr)
	stubDNS(t, func(n int) ([]string, error) {
		if n < 2 {
			return nil, &net.DNSError{Err: "server misbehaving", Name: "edge.test", IsTemporary: true}
		}
		return []string{"127.0.0.1"}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunEdges(ctx, dnsPolicy(0), []string{net.JoinHostPort("edge.test", port)}, true, newTestAgent(t), zap.NewNop())
	}()
	select {
	case <-fe.conns:
	case err := <-done:
		t.Fatalf("RunEdges returned %v before the name resolved", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no node became ready")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}

// A name that never resolves spends the connect policy's budget, one
// lookup per attempt, and then stops as an exhausted budget does.
func TestEdgeNameThatNeverResolvesSpendsTheBudget(t *testing.T) {
	lookups := stubDNS(t, func(int) ([]string, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "edge.test", IsNotFound: true}
	})
	err := RunEdges(context.Background(), dnsPolicy(3), []string{"edge.test:7070"}, true, newTestAgent(t), zap.NewNop())
	if !errors.Is(err, ErrAttemptsExhausted) || !errors.Is(err, ErrNoEdge) {
		t.Fatalf("err = %v, want exhaustion of a name that does not resolve", err)
	}
	if got := lookups.Load(); got != 3 {
		t.Fatalf("%d lookups, want exactly 3", got)
	}
}

// startFakeEdgeOn is startFakeEdge listening on addr; script may be nil.
func startFakeEdgeOn(t *testing.T, addr string, payload *iop.NodeConfigPayload, script func(n int) iop.RejectCode) *fakeEdge {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	if script == nil {
		script = func(int) iop.RejectCode { return iop.RejectCode_REJECT_CODE_UNSPECIFIED }
	}
	fe := &fakeEdge{addr: ln.Addr().String(), payload: payload, script: script,
		conns: make(chan *nodewire.Conn, 64), ready: map[*nodewire.Conn]bool{}}
	fe.srv = nodewire.NewServer(nodewire.ServerConfig{Handler: fe, HandshakeTimeout: 5 * time.Second})
	done := make(chan struct{})
	// Owner: the test; stops at srv.Close in Cleanup.
	go func() { defer close(done); _ = fe.srv.Serve(ln) }()
	t.Cleanup(func() { _ = fe.srv.Close(); <-done })
	return fe
}

// A name with an A and an AAAA record (one dual-stack edge) gets one
// session, not one per address: two sessions of one node with one edge
// would supersede each other at every reconnect. Here the two addresses
// reach two listeners, so a session through the IPv6 one is seen.
func TestDualStackEdgeNameGetsOneSession(t *testing.T) {
	v4 := startFakeEdge(t, mockPayload(1), nil)
	_, port, _ := net.SplitHostPort(v4.addr)
	v6 := startFakeEdgeOn(t, net.JoinHostPort("::1", port), mockPayload(1), nil)
	stubDNS(t, func(int) ([]string, error) { return []string{"::1", "127.0.0.1"}, nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunEdges(ctx, dnsPolicy(0), []string{net.JoinHostPort("edge.test", port)}, true, newTestAgent(t), zap.NewNop())
	}()
	v4.nextReady(t)
	// A session through the AAAA address would be dialled beside the
	// first: give it several reconnect intervals to register.
	time.Sleep(50 * dnsPolicy(0).Interval)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
	if n := v6.registrations(); n != 0 {
		t.Fatalf("%d registrations through the AAAA address of an edge the node already has a session with, want 0", n)
	}
}
