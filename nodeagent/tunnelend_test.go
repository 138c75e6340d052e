package nodeagent

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// scriptInstance is a mock instance whose Tunnel is the test's script.
type scriptInstance struct {
	adapter.Instance // mock: Run and the rest
	tunnel           func(ctx context.Context, sink adapter.TunnelSink) error
}

func (s *scriptInstance) Tunnel(ctx context.Context, _ *iop.ProviderTunnelRequest, sink adapter.TunnelSink) error {
	return s.tunnel(ctx, sink)
}

// startScriptNode runs a node whose one adapter, "s" of capacity 1,
// tunnels with script, and returns the agent and the edge-side connection.
func startScriptNode(t *testing.T, script func(ctx context.Context, sink adapter.TunnelSink) error) (*Agent, *nodewire.Conn) {
	t.Helper()
	return startWrappedMockNode(t, "s", func(in adapter.Instance) adapter.Instance {
		return &scriptInstance{Instance: in, tunnel: script}
	})
}

// startWrappedMockNode runs a node whose one provider, name (capacity 1),
// is a mock instance wrapped by wrap, against a fake edge; the heartbeat
// timeout is generous, so a loaded machine's stalls do not end the
// session. It returns the agent and the edge-side connection.
func startWrappedMockNode(t *testing.T, name string, wrap func(adapter.Instance) adapter.Instance) (*Agent, *nodewire.Conn) {
	t.Helper()
	factory := func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		in, err := mock.New(cfg, env)
		if err != nil {
			return nil, err
		}
		return wrap(in), nil
	}
	a := NewAgent(map[string]adapter.Factory{"mock": factory}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	payload := &iop.NodeConfigPayload{
		Adapters:  []*iop.AdapterConfig{{Name: name, Type: "mock", Category: "api", Capacity: 1}},
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 30000},
	}
	return a, startNode(t, startFakeEdge(t, payload, nil), a)
}

func openTunnel(t *testing.T, c *nodewire.Conn, runID string, stream bool) *nodewire.Stream {
	t.Helper()
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Abort)
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: runID, Adapter: "s", Target: "m", Method: "POST", Path: "/chat/completions", Stream: stream, Body: []byte(`{}`),
	}}}); err != nil {
		t.Fatal(err)
	}
	return st
}

func frameSize(t *testing.T, f *iop.ProviderTunnelFrame) int {
	t.Helper()
	b, err := nodewire.AppendFrame(nil, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: f}}, nodewire.DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// A tunnel's capacity slot is free before its END frame is sent: an Edge
// that sees END may place the next request at once. Here the Edge reads
// nothing, and the answer leaves the stream's window a few hundred bytes
// short of the END frame, so END cannot go out until the Edge reads; the
// slot must be free all the same.
func TestTunnelSlotFreeBeforeEnd(t *testing.T) {
	const window = 256 << 10 // the stream's initial send window (nodewire)
	runID := "t-" + strings.Repeat("r", 1000)
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	// The frames the sink writes before END, as it stamps them.
	used := frameSize(t, &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200, Sequence: 1, RunId: runID,
		Headers: []*iop.Header{{Name: "Content-Type", Value: "text/event-stream"}}})
	var chunks [][]byte
	seq := uint64(1)
	// Leave about half the END frame (which carries the 1 KB run id) of
	// window: END waits for the Edge to read.
	for left := window - used - 500; ; {
		seq++
		overhead := frameSize(t, &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: seq, Body: make([]byte, nodewire.MaxBodyChunk)}) - nodewire.MaxBodyChunk
		n := min(nodewire.MaxBodyChunk, left-overhead)
		chunks = append(chunks, make([]byte, n))
		left -= n + overhead
		if n < nodewire.MaxBodyChunk {
			break
		}
	}
	var returned atomic.Bool
	a, c := startScriptNode(t, func(ctx context.Context, sink adapter.TunnelSink) error {
		if err := sink.Status(200, sse); err != nil {
			return err
		}
		for _, p := range chunks {
			if err := sink.Body(p); err != nil {
				return err
			}
		}
		returned.Store(true)
		return nil
	})
	st := openTunnel(t, c, runID, true)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if returned.Load() && a.Snapshots(context.Background())[0].GetInFlight() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tunnel's adapter returned (%v) but its slot is still held while END waits on the Edge", returned.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	envs := readAll(t, st)
	if last := envs[len(envs)-1].GetProviderTunnelFrame(); last.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END {
		t.Fatalf("tunnel ended with %v, want END", last)
	}
}

// An SSE answer to a request that did not ask for a stream (a provider
// that streams anyway) is still relayed event by event, not held back
// until the answer ends.
func TestSSEAnswerToNonStreamRequestSentPerEvent(t *testing.T) {
	seen := make(chan struct{})
	_, c := startScriptNode(t, func(ctx context.Context, sink adapter.TunnelSink) error {
		if err := sink.Status(200, http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}); err != nil {
			return err
		}
		if err := sink.Body([]byte("data: {}\n\n")); err != nil {
			return err
		}
		// The rest of the answer waits for the Edge to have the first event.
		select {
		case <-seen:
		case <-ctx.Done():
			return ctx.Err()
		}
		return sink.Body([]byte("data: [DONE]\n\n"))
	})
	st := openTunnel(t, c, "t1", false)
	_ = st.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		env, err := st.Recv()
		if err != nil {
			t.Fatalf("no body frame before the answer ended: %v", err)
		}
		if env.GetProviderTunnelFrame().GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
			break
		}
	}
	close(seen)
	envs := readAll(t, st)
	if last := envs[len(envs)-1].GetProviderTunnelFrame(); last.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END {
		t.Fatalf("tunnel ended with %v, want END", last)
	}
}

// A tunnel the Edge cancels ends with an ERROR frame coded CANCELLED, not
// an internal error.
func TestCancelledTunnelIsCancelledOnTheWire(t *testing.T) {
	entered := make(chan struct{})
	_, c := startScriptNode(t, func(ctx context.Context, sink adapter.TunnelSink) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	})
	st := openTunnel(t, c, "t1", true)
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the tunnel never reached its adapter")
	}
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "t1"}}}); err != nil {
		t.Fatal(err)
	}
	envs := readAll(t, st)
	if len(envs) == 0 {
		t.Fatal("no terminal frame")
	}
	last := envs[len(envs)-1].GetProviderTunnelFrame()
	if last.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR || last.GetError().GetCode() != iop.ErrorCode_ERROR_CODE_CANCELLED {
		t.Fatalf("cancelled tunnel ended with %v, want ERROR coded CANCELLED", last)
	}
}
