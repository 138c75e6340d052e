package nodeagent

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// registrationsReach waits until fe has seen n registrations.
func registrationsReach(t *testing.T, fe *fakeEdge, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for fe.registrations() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d registrations, want %d", fe.registrations(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With several edges, the transport command describes the session it was
// asked on: the end of another edge's session leaves it connected.
func TestTransportCommandIsPerEdgeSession(t *testing.T) {
	a := startFakeEdge(t, mockPayload(1), nil)
	// b accepts the first registration only: once its session ends, it
	// stays down.
	b := startFakeEdge(t, mockPayload(1), func(n int) iop.RejectCode {
		if n > 0 {
			return iop.RejectCode_REJECT_CODE_UNAVAILABLE
		}
		return iop.RejectCode_REJECT_CODE_UNSPECIFIED
	})
	agent := newTestAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunEdges(ctx, dnsPolicy(0), []string{a.addr, b.addr}, false, agent, zap.NewNop()) }()
	t.Cleanup(func() { cancel(); <-done })
	ca := a.nextReady(t)
	cb := b.nextReady(t)
	// Each answer counts the streams its own session accepted: two on a
	// (this answer's included), one on b.
	command(t, ca, CmdTransport)
	if tr := command(t, ca, CmdTransport); tr["connected"] != true || accepted(tr) != 2 {
		t.Fatalf("a: transport = %v, want a's session (2 streams accepted)", tr)
	}
	if tr := command(t, cb, CmdTransport); tr["connected"] != true || accepted(tr) != 1 {
		t.Fatalf("b: transport = %v, want b's session (1 stream accepted)", tr)
	}
	// b's session ends; the node's next registration with b (refused)
	// comes after that session has been torn down.
	_ = cb.Close()
	registrationsReach(t, b, 2)
	if tr := command(t, ca, CmdTransport); tr["connected"] != true {
		t.Fatalf("a: transport = %v after b's session ended, want connected", tr)
	}
}

func accepted(transport map[string]any) float64 {
	stats, _ := transport["stats"].(map[string]any)
	n, _ := stats["streams_accepted"].(float64)
	return n
}
