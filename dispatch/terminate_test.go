package dispatch

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/faultproxy"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// congest fills node's session until a small frame can no longer be
// queued for it (the node stopped reading: the proxy is frozen). The
// fillers stay blocked until the session closes.
func congest(t *testing.T, c *nodewire.Conn, fillers *sync.WaitGroup) {
	t.Helper()
	chunk := &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{Body: make([]byte, 200<<10)}}}
	probe := &iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{Kind: iop.CancelKind_CANCEL_KIND_TERMINATE_SESSION, SessionId: "probe"}}}
	stuck := 0
	for i := 0; i < 1024; i++ {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		fillers.Add(1)
		started := make(chan struct{})
		// Owner: the test. Ends when its send completes or the session
		// closes (the test's cleanup).
		go func() {
			defer fillers.Done()
			close(started)
			_ = st.Send(chunk)
		}()
		// A probe taken before the filler runs proves nothing: without
		// this wait the loop (unraced, fast) ran its 1024 rounds before
		// any filler had queued a byte.
		<-started
		ps, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		_ = ps.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		err = ps.Send(probe)
		ps.Abort()
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			stuck = 0
		} else if stuck++; stuck == 3 {
			return
		}
	}
	t.Fatal("the session never congested")
}

// TerminateSession is bounded by its context whatever the nodes do: a
// node that stopped reading held it for the 5 s write deadline (per node,
// one after another), past the admin API's own timeout.
func TestTerminateSessionBoundedByContext(t *testing.T) {
	cfg := buildCfg(t, oneNodeCfg(t, 2), oneNodeModels)
	// The frozen node's heartbeats stop reaching the edge, which drops it
	// after the heartbeat timeout counted from the last one (10 to 15 s
	// after the freeze by default), while filling the session runs as
	// long as the load makes it: on a loaded host it ran past that, and
	// the node was gone before TerminateSession was called. What is
	// tested is TerminateSession's own bound, so the heartbeat timeout is
	// put out of the way; the writer's stall bound (10 s without a chunk
	// written) still counts, but only from the session filling up.
	cfg.Nodes[0].HeartbeatIntervalSec, cfg.Nodes[0].HeartbeatTimeoutSec = 60, 600
	f := newFixture(t, cfg, nil)
	_, addr := startWire(t, f)
	px, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	cc := dialNode(t, px.Addr(), "n1")
	if err := cc.Ready(context.Background(), "n1"); err != nil {
		t.Fatalf("ready: %v", err)
	}
	// The edge activates the node right after writing its ready answer.
	waitFor(t, "n1 ready", func() bool { return nodeOf(f.d.Status(), "n1").Connected })
	c, err := f.d.nodeConn("n1")
	if err != nil {
		t.Fatal(err)
	}
	var fillers sync.WaitGroup
	t.Cleanup(func() {
		_ = c.Close()
		fillers.Wait()
	})
	px.Freeze()
	// congest can only guess that the node's socket is full: a probe may
	// lose its turn to the fillers while the kernel still takes bytes. A
	// TERMINATE that got through proves the node was still reading, so the
	// session is filled further and TerminateSession asked again; every
	// call must still end by its context.
	for attempt := 1; ; attempt++ {
		congest(t, c, &fillers)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		n, err := f.d.TerminateSession(ctx, "s-1")
		took := time.Since(start)
		cancel()
		if took > 2*time.Second {
			t.Fatalf("TerminateSession returned after %s; its context ended after 300ms", took)
		}
		if n == 1 && err == nil && attempt < 10 {
			t.Logf("attempt %d: the node still took the TERMINATE; filling its session further", attempt)
			continue
		}
		if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("TerminateSession = %d, %v; want 0 nodes reached and context.DeadlineExceeded", n, err)
		}
		return
	}
}

// A node that reads gets the TERMINATE_SESSION and counts as reached.
func TestTerminateSessionReachesReadyNode(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	n := startWireNode(t, f, silentNode)
	waitFor(t, "n1 ready", func() bool { return nodeOf(f.d.Status(), "n1").Connected })
	reached, err := f.d.TerminateSession(context.Background(), "s-1")
	if reached != 1 || err != nil {
		t.Fatalf("TerminateSession = %d, %v; want 1 node reached", reached, err)
	}
	got := n.next(t).GetCancelRequest()
	if got.GetKind() != iop.CancelKind_CANCEL_KIND_TERMINATE_SESSION || got.GetSessionId() != "s-1" || got.GetReason() != "admin" {
		t.Fatalf("node received %v", got)
	}
}
