package nodeagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A run that names the id of a run still going on the node is refused: the
// first stays cancellable by id (CANCEL_RUN on a stream of its own), and
// once it has ended the node tracks no id at all.
func TestRepeatedRunIDIsRefusedAndFirstStaysCancellable(t *testing.T) {
	a := fullAgent(t)
	c := startNode(t, slowMockEdge(t, 2), a)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Long enough (150 ms a word) that only the cancel ends the first run.
	words := strings.Repeat("w ", 200)
	run := func(st *nodewire.Stream) error {
		return st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
			RunId: "r1", Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput(words),
		}}})
	}
	if err := run(st); err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
	if env, err := st.Recv(); err != nil || env.GetRunEvent().GetType() != iop.RunEventType_RUN_EVENT_TYPE_START {
		t.Fatalf("first event %v, %v", env, err)
	}

	second, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := run(second); err != nil {
		t.Fatal(err)
	}
	if ev := terminal(readAll(t, second)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != adapter.CodeInternal {
		t.Fatalf("second run with the id in use ended %v, want an internal error", ev)
	}

	exchange(t, c, &iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "r1"}}})
	if ev := terminal(readAll(t, st)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED {
		t.Fatalf("first run ended %v, want CANCELLED by id", ev)
	}
	// The node closes its side only after the run's bookkeeping is done.
	a.runsMu.Lock()
	n := len(a.runs)
	a.runsMu.Unlock()
	if n != 0 {
		t.Fatalf("%d run ids still tracked after every run ended", n)
	}
}

// A tunnel naming the id of a run still going is refused with an error
// frame, and the run it would have shadowed stays cancellable by id.
func TestTunnelWithRunIDInUseIsRefused(t *testing.T) {
	c := startNode(t, slowMockEdge(t, 2), fullAgent(t))
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput(strings.Repeat("w ", 200)),
	}}}); err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
	if env, err := st.Recv(); err != nil || env.GetRunEvent().GetType() != iop.RunEventType_RUN_EVENT_TYPE_START {
		t.Fatalf("first event %v, %v", env, err)
	}
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: "r1", Adapter: "slow", Target: "m", Method: "POST", Path: "/chat/completions", Body: []byte(`{}`),
	}}})
	if len(envs) != 1 || envs[0].GetProviderTunnelFrame().GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR ||
		envs[0].GetProviderTunnelFrame().GetError().GetCode() != adapter.CodeInternal {
		t.Fatalf("tunnel with the id in use got %v, want one internal error frame", envs)
	}
	exchange(t, c, &iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "r1"}}})
	if ev := terminal(readAll(t, st)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED {
		t.Fatalf("run ended %v, want CANCELLED by id", ev)
	}
}
