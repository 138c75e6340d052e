package stack

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testcaps"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// fakeNode registers with the edge over the real wire as node id and hands
// every stream the edge opens to the test.
type fakeNode struct {
	streams chan nodeStream
}

type nodeStream struct {
	st    *nodewire.Stream
	first *iop.Envelope
	done  chan struct{} // closed by the test to end the handler
}

func startFakeNode(t *testing.T, addr, id, token string) *fakeNode {
	t.Helper()
	return startFakeNodeWith(t, addr, id, token, nil)
}

// startFakeNodeWith is startFakeNode declaring caps in its ready request.
func startFakeNodeWith(t *testing.T, addr, id, token string, caps []*iop.AdapterCapabilities) *fakeNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, resp, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: addr, HandshakeTimeout: 5 * time.Second},
		&iop.RegisterRequest{ProtocolVersion: nodewire.ProtocolVersion, NodeId: id, Token: token})
	if err != nil || !resp.GetAccepted() {
		cancel()
		t.Fatalf("register: %v %v", err, resp)
	}
	if caps == nil {
		caps = testcaps.For(resp.GetConfig())
	}
	if err := c.ReadyWith(ctx, &iop.NodeReadyRequest{NodeId: id, Adapters: caps}); err != nil {
		cancel()
		t.Fatalf("ready: %v", err)
	}
	fn := &fakeNode{streams: make(chan nodeStream, 16)}
	served := make(chan struct{})
	// Owner: the test. Stops when cancel (cleanup) closes the connection;
	// Serve waits for the handlers, which end when their done closes or the
	// connection does.
	go func() {
		defer close(served)
		_ = c.Serve(ctx, func(hctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
			ns := nodeStream{st: st, first: first, done: make(chan struct{})}
			select {
			case fn.streams <- ns:
			case <-hctx.Done():
				return
			}
			select {
			case <-ns.done:
			case <-hctx.Done():
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-served })
	return fn
}

func (fn *fakeNode) next(t *testing.T) nodeStream {
	t.Helper()
	select {
	case ns := <-fn.streams:
		t.Cleanup(func() { closeOnce(ns.done) })
		return ns
	case <-time.After(10 * time.Second):
		t.Fatal("the edge opened no stream")
		return nodeStream{}
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// The edge cancels an exchange whose client went away with
// CancelRequest(CANCEL_RUN) for that exchange's run id, on both paths,
// asserted on the wire.
func TestCancelRunOnTheWire(t *testing.T) {
	for _, path := range []string{"tunnel", "run"} {
		t.Run(path, func(t *testing.T) {
			typ := "vllm"
			if path == "run" {
				typ = "mock"
			}
			cfg := &config.Edge{
				Nodes: []config.NodeSpec{{ID: "a", Token: "tok-a", Providers: []config.ProviderSpec{
					{Name: "p", Type: typ, BaseURL: "http://127.0.0.1:1/v1", Capacity: 1}}}},
				Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "p", Target: "t"}}}},
			}
			e := StartEdge(t, cfg, EdgeOptions{})
			fn := startFakeNode(t, e.NodeAddr, "a", "tok-a")
			e.WaitReady(t, "a", 10*time.Second)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			errc := make(chan error, 1)
			// Owner: the test; ends when cancel aborts the request.
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
				errc <- err
			}()
			ns := fn.next(t)
			var runID string
			switch path {
			case "tunnel":
				runID = ns.first.GetProviderTunnelRequest().GetRunId()
				_ = ns.st.Send(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
					RunId: runID, Sequence: 1, Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200,
					Headers: []*iop.Header{{Name: "Content-Type", Value: "text/event-stream"}}}}})
				_ = ns.st.Send(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
					RunId: runID, Sequence: 2, Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("data: {}\n\n")}}})
			case "run":
				runID = ns.first.GetRunRequest().GetRunId()
				_ = ns.st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{
					RunId: runID, Sequence: 1, Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "he"}}})
			}
			if runID == "" {
				t.Fatalf("no run id in %v", ns.first)
			}
			WaitFor(t, 10*time.Second, "the edge to relay the first byte", func() bool {
				p := e.Dispatcher.Status().Nodes[0].Providers[0]
				return p.InFlight == 1
			})
			time.Sleep(100 * time.Millisecond) // the first byte reaches the client
			cancel()
			_ = ns.st.SetReadDeadline(time.Now().Add(10 * time.Second))
			env, err := ns.st.Recv()
			if err != nil {
				t.Fatalf("no CancelRequest on the stream: %v", err)
			}
			cr := env.GetCancelRequest()
			if cr.GetKind() != iop.CancelKind_CANCEL_KIND_CANCEL_RUN || cr.GetRunId() != runID || cr.GetReason() != "client_disconnect" {
				t.Fatalf("cancel = %v, want CANCEL_RUN for %s (client_disconnect)", cr, runID)
			}
			<-errc
		})
	}
}
