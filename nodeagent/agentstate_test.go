package nodeagent

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A refresh that leaves an adapter's config as it was keeps its instance
// (no rebuild: a CLI adapter's sessions live there); the configured
// category and the instance's name are what the node reports.
func TestUnchangedAdapterKeepsItsInstance(t *testing.T) {
	built := 0
	a := NewAgent(map[string]adapter.Factory{"mock": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		built++
		return mock.New(cfg, env)
	}}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	p := mockPayload(2)
	p.Adapters[0].Category = "cli"
	if _, err := a.Apply(p, true); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Apply(p, false); st != iop.RefreshStatus_REFRESH_STATUS_APPLIED || built != 1 {
		t.Fatalf("refresh with the same config: %v %v, %d instances built, want 1", st, err, built)
	}
	if s := a.Snapshots(context.Background())[0]; s.GetCategory() != "cli" || s.GetProviderId() != "m" {
		t.Fatalf("snapshot %v: want provider m of the configured category cli", s)
	}
	if c := a.Capabilities(); len(c) != 1 || c[0].GetAdapter() != "m" {
		t.Fatalf("capabilities %v: want adapter m", c)
	}
}

// CANCEL_RUN on a stream of its own (by run id) cancels that run.
func TestCancelRunByIDOnAnotherStream(t *testing.T) {
	c := startNode(t, slowMockEdge(t, 1), fullAgent(t))
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput("a b c d e f g h i j k l m n o p q r s t"),
	}}}); err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
	if env, err := st.Recv(); err != nil || env.GetRunEvent().GetType() != iop.RunEventType_RUN_EVENT_TYPE_START {
		t.Fatalf("first event %v, %v", env, err)
	}
	exchange(t, c, &iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "r1"}}})
	if ev := terminal(readAll(t, st)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED {
		t.Fatalf("terminal %v, want CANCELLED", ev)
	}
}

// A removed adapter's gate is kept only while exchanges still hold its
// slots: one removed idle is forgotten at once, so names come and go
// without the node keeping a gate for each.
func TestRemovedIdleAdapterLeavesNoGate(t *testing.T) {
	a := newTestAgent(t)
	p := mockPayload(1)
	p.Adapters = append(p.Adapters, &iop.AdapterConfig{Name: "gone", Type: "mock", Capacity: 1})
	if _, err := a.Apply(p, true); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Apply(mockPayload(1), false); st != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("refresh: %v %v", st, err)
	}
	a.mu.RLock()
	n := len(a.retiredGates)
	a.mu.RUnlock()
	if n != 0 {
		t.Fatalf("%d gates kept for removed adapters with nothing in flight", n)
	}
}
