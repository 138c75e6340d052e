package nodeagent

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/nodewire"
)

// "edge session ready" names each field once: iop-node's logger carries
// node_id on every line (cmd/iop-node), and a second node_id key on the
// same line is emitted twice by zap, which log pipelines read as a
// conflict (one value wins, or the line is refused).
func TestEdgeSessionReadyLogsEachFieldOnce(t *testing.T) {
	fe := startFakeEdge(t, mockPayload(1), nil)
	core, logs := observer.New(zapcore.InfoLevel)
	// As cmd/iop-node builds it: the node's id on every line.
	lg := zap.New(core).With(zap.String("node_id", "n1"))
	states := newAttemptLog()
	s := NewSupervisor(SupervisorConfig{
		Dial:   nodewire.DialConfig{Address: fe.addr, HandshakeTimeout: 5 * time.Second},
		NodeID: "n1", Token: "tok", Interval: 10 * time.Millisecond,
	}, newTestAgent(t), lg)
	s.onState = states.note
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Owner: this test. Stops when cancel ends Run.
	go func() { done <- s.Run(ctx) }()
	fe.nextReady(t)
	waitState(t, states, "ready") // the line is logged before the ready state
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	ready := logs.FilterMessage("edge session ready").All()
	if len(ready) != 1 {
		t.Fatalf("%d \"edge session ready\" lines, want 1", len(ready))
	}
	seen := map[string]int{}
	for _, f := range ready[0].Context {
		seen[f.Key]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("field %q logged %d times on \"edge session ready\", want once (fields %v)", k, n, ready[0].Context)
		}
	}
	if seen["node_id"] != 1 || seen["adapters"] != 1 || seen["draining"] != 1 {
		t.Errorf("fields %v, want node_id, adapters and draining once each", ready[0].ContextMap())
	}
}
