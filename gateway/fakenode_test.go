package gateway_test

import (
	"context"
	"github.com/iop-gateway/iop/internal/testcaps"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// --- fake nodes ----------------------------------------------------------

// fakeNode is node gpu-a played by the test over the real wire: it
// registers and becomes ready (and heartbeats) like iop-node, but answers
// streams with its own handler, or, without one, never accepts a stream
// at all (so it never reads a byte of it nor grants it window).
type fakeNode struct {
	cc  *nodewire.ClientConn
	got chan *iop.Envelope // every envelope a handler received, in order
}

// startFakeNode connects a fake gpu-a to e and waits until it is ready.
// handle (may be nil) serves each edge-opened stream; record passes what
// it receives to fakeNode.got.
func startFakeNode(t *testing.T, e *stack.Edge, handle func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope)) *fakeNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cc, reg, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: e.NodeAddr, HandshakeTimeout: waitLong},
		&iop.RegisterRequest{ProtocolVersion: nodewire.ProtocolVersion, NodeId: nodeID, Token: nodeToken})
	if err != nil {
		cancel()
		t.Fatalf("fake node dial: %v", err)
	}
	if err := cc.ReadyWith(ctx, &iop.NodeReadyRequest{NodeId: nodeID, Adapters: testcaps.For(reg.GetConfig())}); err != nil {
		cancel()
		t.Fatalf("fake node ready: %v", err)
	}
	n := &fakeNode{cc: cc, got: make(chan *iop.Envelope, 64)}
	served := make(chan struct{})
	if handle != nil {
		// Owner: the test (cleanup cancels ctx). Stops when the connection
		// closes; Serve waits for its handlers.
		go func() {
			defer close(served)
			_ = cc.Serve(ctx, func(hctx context.Context, st *nodewire.Stream, first *iop.Envelope) { handle(n, hctx, st, first) })
		}()
	} else {
		close(served)
	}
	t.Cleanup(func() {
		cancel()
		_ = cc.Close()
		<-served
	})
	e.WaitReady(t, nodeID, waitLong)
	return n
}

// record passes env to the test (never blocking the node).
func (n *fakeNode) record(env *iop.Envelope) {
	select {
	case n.got <- env:
	default:
	}
}

// silent is a node that takes every request, reads on (recording what
// arrives, the CancelRequest included) and never answers nor closes its
// side: the stream is held until the connection ends.
func silent(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
	if first != nil {
		n.record(first)
	}
	for {
		env, err := st.Recv()
		if err != nil {
			break
		}
		n.record(env)
	}
	<-ctx.Done()
}

// nextCancel waits for the next CancelRequest the fake node received.
func (n *fakeNode) nextCancel(t *testing.T) *iop.CancelRequest {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		select {
		case env := <-n.got:
			if c := env.GetCancelRequest(); c != nil {
				return c
			}
		case <-deadline:
			t.Fatal("the node never received a CancelRequest")
		}
	}
}

// nextRequest waits for the next run or tunnel request the fake node
// received.
func (n *fakeNode) nextRequest(t *testing.T) *iop.Envelope {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		select {
		case env := <-n.got:
			if env.GetRunRequest() != nil || env.GetProviderTunnelRequest() != nil {
				return env
			}
		case <-deadline:
			t.Fatal("the node never received a request")
		}
	}
}

// fakeNodeConfig: gpu-a serves vllm-main (model qwen-7b, tunnel route)
// and mock (model demo, run route); the node is expected to be a fake, so
// the provider addresses are never dialled.
func fakeNodeConfig(t *testing.T) *config.Edge {
	return edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", "http://"+closedPort(t)+"/v1"), mockProvider("mock", nil)},
		modelOn("qwen-7b", "vllm-main", target), modelOn("demo", "mock", "mock-echo"))
}

// recvUntilCancel reads st until the edge's CancelRequest (true) or the
// stream's end (false), recording each message on n unless n is nil.
func recvUntilCancel(n *fakeNode, st *nodewire.Stream) bool {
	for {
		env, err := st.Recv()
		if err != nil {
			return false
		}
		if n != nil {
			n.record(env)
		}
		if env.GetCancelRequest() != nil {
			return true
		}
	}
}
