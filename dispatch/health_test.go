package dispatch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A health poll answered by a session that a newer registration of the
// same node superseded before the answer was recorded changes nothing: the
// stale session's "offline" does not take the new generation's provider
// out of dispatch.
func TestStaleHealthAnswerIgnored(t *testing.T) {
	cfg := buildCfg(t, oneNodeCfg(t, 2), oneNodeModels)
	var (
		once       sync.Once
		superseded = make(chan struct{})
		h          *spyHandler
		addr       string
		hookErr    error
	)
	// The first answer (the old session's) is held until a new session of
	// the node is dispatch-ready.
	testHookPolled = func() {
		once.Do(func() {
			defer close(superseded)
			ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
			defer cancel()
			cc, resp, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: addr, HandshakeTimeout: waitDeadline}, regReq("n1", testToken))
			if err != nil || !resp.GetAccepted() {
				hookErr = errors.Join(errors.New("dial"), err)
				return
			}
			t.Cleanup(func() { _ = cc.Close() })
			if err := cc.Ready(ctx, "n1"); err != nil {
				hookErr = err
				return
			}
			for ctx.Err() == nil {
				h.d.mu.Lock()
				n := h.d.nodes["n1"]
				done := n.state == stateReady && n.owner == h.conn(1)
				h.d.mu.Unlock()
				if done {
					return
				}
				time.Sleep(time.Millisecond)
			}
			hookErr = ctx.Err()
		})
	}
	t.Cleanup(func() { testHookPolled = nil }) // after the dispatcher's Close
	f := &fixture{t: t, reg: prometheus.NewRegistry(), bus: &recBus{}}
	f.d = New(cfg, Options{Bus: f.bus, Metrics: NewMetrics(f.reg), HealthInterval: 50 * time.Millisecond})
	t.Cleanup(func() {
		f.d.Close()
		f.wg.Wait()
	})
	h, addr = startWire(t, f)
	old := dialNode(t, addr, "n1")
	if err := old.Ready(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	// Owner: the test. Stops when the old session closes (superseded) or
	// at cleanup.
	go func() {
		defer close(served)
		_ = old.Serve(ctx, func(_ context.Context, st *nodewire.Stream, first *iop.Envelope) {
			if first.GetNodeCommandRequest() == nil {
				return
			}
			_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeCommandResponse{NodeCommandResponse: &iop.NodeCommandResponse{
				Providers: []*iop.ProviderSnapshot{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OFFLINE}},
			}}})
		})
	}()
	t.Cleanup(func() { cancel(); <-served })
	select {
	case <-superseded:
	case <-time.After(waitDeadline):
		t.Fatal("the health poll never answered")
	}
	if hookErr != nil {
		t.Fatalf("new session: %v", hookErr)
	}
	// The stale answer is recorded (or not) right after the hook; the new
	// session answers no poll, so nothing changes the health after that.
	time.Sleep(300 * time.Millisecond)
	if p := provOf(f.d.Status(), "n1", "p"); p == nil || p.Health != "ok" || p.Status != "available" {
		t.Fatalf("provider of the new generation after the old session's answer: %+v", p)
	}
	l, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true})
	if err != nil {
		t.Fatalf("acquire on the new generation: %v", err)
	}
	l.Release(ReasonCompleted)
}
