package nodeagent

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// fakeEdge is a scripted Edge: for the n-th registration (0-based) script(n)
// decides the answer; accepted connections are acknowledged ready and
// published on conns.
type fakeEdge struct {
	addr    string
	srv     *nodewire.Server
	payload *iop.NodeConfigPayload
	script  func(n int) iop.RejectCode // UNSPECIFIED = accept

	mu      sync.Mutex
	regs    int                     // guarded by mu
	current *nodewire.Conn          // guarded by mu
	conns   chan *nodewire.Conn     // ready connections, in order
	ready   map[*nodewire.Conn]bool // guarded by mu
}

func startFakeEdge(t *testing.T, payload *iop.NodeConfigPayload, script func(n int) iop.RejectCode) *fakeEdge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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

func (fe *fakeEdge) Register(c *nodewire.Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
	fe.mu.Lock()
	n := fe.regs
	fe.regs++
	fe.mu.Unlock()
	if code := fe.script(n); code != iop.RejectCode_REJECT_CODE_UNSPECIFIED {
		return &iop.RegisterResponse{Accepted: false, RejectCode: code, Reason: "scripted"}
	}
	fe.mu.Lock()
	fe.current = c
	fe.mu.Unlock()
	return &iop.RegisterResponse{Accepted: true, NodeId: req.GetNodeId(), Config: fe.payload}
}

func (fe *fakeEdge) Ready(c *nodewire.Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if fe.current != c {
		return &iop.NodeReadyResponse{Ready: false, Reason: "stale"}
	}
	return &iop.NodeReadyResponse{Ready: true}
}

// Activate publishes c once its ready answer was written.
func (fe *fakeEdge) Activate(c *nodewire.Conn) {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if fe.current != c || fe.ready[c] {
		return
	}
	fe.ready[c] = true
	fe.conns <- c
}

// Closed records nothing: no test reads close causes here, and a blocking
// send would hang the server's Close once a node failed to get ready 64
// times.
func (fe *fakeEdge) Closed(*nodewire.Conn, error) {}

func (fe *fakeEdge) registrations() int {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	return fe.regs
}

// nextReady waits for the next ready connection.
func (fe *fakeEdge) nextReady(t *testing.T) *nodewire.Conn {
	t.Helper()
	select {
	case c := <-fe.conns:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no node became ready")
		return nil
	}
}

// exchange opens a stream on c, sends first and collects every envelope
// until the node closes the stream.
func exchange(t *testing.T, c *nodewire.Conn, first *iop.Envelope) []*iop.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(first); err != nil {
		t.Fatal(err)
	}
	return readAll(t, st)
}
