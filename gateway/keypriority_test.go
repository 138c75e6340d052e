package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A key's queue priority (auth.key_priorities) orders the queue, and
// X-IOP-Priority may lower it but never raise it: with the one slot busy,
// a low key's request asking for priority 10, queued first, is still
// served after a high key's request queued behind it.
func TestKeyPriorityNotRaisedByHeader(t *testing.T) {
	cfg := fakeNodeConfig(t)
	for i := range cfg.Nodes[0].Providers {
		if cfg.Nodes[0].Providers[i].Name == "mock" {
			cfg.Nodes[0].Providers[i].Capacity = 1
		}
	}
	cfg.Models[1].QueueTimeoutSec = 60
	cfg.Auth.APIKeys = []string{"sk-low", "sk-high"}
	cfg.Auth.KeyPriorities = []config.KeyPriority{{Key: "sk-low", Priority: -5}, {Key: "sk-high", Priority: 5}}
	e := startEdge(t, cfg)
	release := make(chan struct{}, 3)
	n := startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		n.record(first)
		select {
		case <-release:
		case <-ctx.Done():
			return
		}
		runID := first.GetRunRequest().GetRunId()
		for i, ev := range []*iop.RunEvent{{Type: iop.RunEventType_RUN_EVENT_TYPE_START},
			{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "ok"}, {Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop"}} {
			ev.RunId, ev.Sequence = runID, uint64(i+1)
			if st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}) != nil {
				return
			}
		}
		_ = st.CloseWrite()
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	})
	c, ctx := httpClient(t), ctxT(t)
	send := func(id, key, prio string) <-chan response {
		h := map[string]string{"Authorization": "Bearer " + key, "X-Request-Id": id}
		if prio != "" {
			h["X-IOP-Priority"] = prio
		}
		ch := make(chan response, 1)
		go func() { // Owner: the test; ends with the request (ctxT bounds it).
			r, err := tryDo(ctx, c, http.MethodPost, e.URL+"/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`, h)
			if err != nil {
				r = response{Body: []byte(err.Error())}
			}
			ch <- r
		}()
		return ch
	}
	pending := func(want float64) func() bool {
		return func() bool {
			return metric(t, e.Registry, "iop_queue_pending", map[string]string{"model": "demo"}) == want
		}
	}
	a := send("req-a", "sk-high", "")
	if got := n.nextRequest(t).GetRunRequest().GetMetadata()["request_id"]; got != "req-a" {
		t.Fatalf("first run %q, want req-a", got)
	}
	b := send("req-b", "sk-low", "10")
	stack.WaitFor(t, waitLong, "req-b queued", pending(1))
	cc := send("req-c", "sk-high", "")
	stack.WaitFor(t, waitLong, "req-c queued", pending(2))

	release <- struct{}{}
	if got := n.nextRequest(t).GetRunRequest().GetMetadata()["request_id"]; got != "req-c" {
		t.Errorf("after the busy run the node got %q, want req-c (priority 5 before -5)", got)
	}
	release <- struct{}{}
	release <- struct{}{}
	for _, ch := range []<-chan response{a, b, cc} {
		if r := waitFor(t, ch, waitLong, "an answer"); r.Status != http.StatusOK {
			t.Errorf("status %d %s", r.Status, r.Body)
		}
	}
}
