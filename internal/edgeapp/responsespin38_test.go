package edgeapp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
)

// respAnswer is an answer askResponsesAsync read whole, or its error.
type respAnswer struct {
	status int
	body   string
	err    error
}

// askResponsesAsync is askResponses on a goroutine of its own (no test
// calls from it): the answer comes on the channel.
func askResponsesAsync(e *stack.Edge, prev string) <-chan respAnswer {
	out := make(chan respAnswer, 1)
	req := responsesBody(prev)
	// Owner: the caller's test; ends with the answer (bounded by the
	// client's timeout).
	go func() {
		c := &http.Client{Timeout: 60 * time.Second}
		resp, err := c.Post(e.URL+"/v1/responses", "application/json", strings.NewReader(req))
		if err != nil {
			out <- respAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		out <- respAnswer{resp.StatusCode, string(body), err}
	}()
	return out
}

// Two edges share one Redis and b's one slot: while edge A holds it, a
// follow-up of b's response reaching edge B waits for b (a would answer
// 404), and gets b's answer once edge A's request ends and its slot is
// returned through Redis. Before, edge B sent it to a at once: 404.
func TestFollowUpWaitsForItsProviderAcrossEdges38(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	a, b := newStoringVLLM(t, "a"), newStoringVLLM(t, "b")
	edgeA, edgeB := startResponsesPair(t, rs.Addr, a, b, 1)
	id := startOnB(t, edgeA, a)
	stack.WaitFor(t, 10*time.Second, "the id in Redis", func() bool {
		return rdb.Exists(context.Background(), "dep:resp:"+id).Val() == 1
	})

	// Edge A fills b: a new conversation that a refuses (503) fails over
	// to b, which holds it.
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // before the edges' and nodes' cleanups: nothing held past a failure
	b.holdNext.Store(&release)
	a.busyNext.Store(true)
	held := askResponsesAsync(edgeA, "")
	stack.WaitFor(t, 10*time.Second, "b's slot held through edge A", func() bool { return b.holdNext.Load() == nil })

	followUp := askResponsesAsync(edgeB, id)
	var early *respAnswer
	stack.WaitFor(t, 10*time.Second, "the follow-up queued on edge B", func() bool {
		select {
		case got := <-followUp:
			early = &got
			return true
		default:
		}
		for _, m := range edgeB.Dispatcher.Status().Models {
			if m.Name == "m" {
				return m.Pending == 1
			}
		}
		return false
	})
	if early != nil {
		t.Fatalf("the follow-up was answered while b was full: %d %s", early.status, early.body)
	}
	free()
	if got := <-held; got.status != http.StatusOK {
		t.Fatalf("the request holding b: %d %v %s", got.status, got.err, got.body)
	}
	select {
	case got := <-followUp:
		if got.status != http.StatusOK || !strings.Contains(got.body, `"id":"resp_b`) {
			t.Fatalf("follow-up through edge B: %d %v: %s", got.status, got.err, got.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follow-up was not served once b's slot was returned")
	}
	if n := a.notFound.Load(); n != 0 {
		t.Fatalf("a answered %d follow-ups 404", n)
	}
}
