package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
)

// countingUpstream imitates a vLLM stream of eight chunks, 40 ms apart,
// and records the most requests it ever had in flight at once.
type countingUpstream struct {
	*httptest.Server
	now, max atomic.Int64
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	u := &countingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			return
		case "/metrics":
			_, _ = io.WriteString(w, "vllm:num_requests_running{model_name=\"x\"} 0\n")
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		n := u.now.Add(1)
		defer u.now.Add(-1)
		for m := u.max.Load(); n > m && !u.max.CompareAndSwap(m, n); m = u.max.Load() {
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range 8 {
			if _, err := fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"},\"finish_reason\":null}]}\n\n", i); err != nil {
				return
			}
			fl.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(40 * time.Millisecond):
			}
		}
		_, _ = io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(u.Close)
	return u
}

// Three edges share two nodes' providers (capacity 4 each) through Redis
// while streams run on all of them, an edge is killed and Redis restarts:
// no backend ever has more than its capacity in flight, every client gets
// a whole stream or an honest error (an HTTP error, an error event, or a
// connection its edge dropped; never a stream cut without one), and every
// lease comes back.
func TestChaosClusterEdgesAndRedis(t *testing.T) {
	rs := testredis.Start(t)
	ups := []*countingUpstream{newCountingUpstream(t), newCountingUpstream(t)}
	cfg := func() *config.Edge {
		c := &config.Edge{Cluster: config.Cluster{Redis: config.ClusterRedis{Address: rs.Addr, LeaseTTLSec: 2, TimeoutMS: 300}}}
		m := model("m", 20)
		for i, u := range ups {
			id := fmt.Sprintf("n%d", i)
			c.Nodes = append(c.Nodes, nodeSpec(id, "t"+id, 0.1, 1,
				config.ProviderSpec{Name: "v", Type: "vllm", BaseURL: u.URL + "/v1", Capacity: 4}))
			m.Providers = append(m.Providers, config.ModelProvider{Node: id, Provider: "v", Target: "x"})
		}
		c.Models = []config.ModelSpec{m}
		return c
	}
	var edges []*stack.Edge
	for range 3 {
		edges = append(edges, stack.StartEdge(t, cfg(), stack.EdgeOptions{Logger: quietLogger(t)}))
	}
	for i := range ups {
		id := fmt.Sprintf("n%d", i)
		stack.StartNode(t, edges[0].NodeAddr, id, stack.NodeOptions{Token: "t" + id, Logger: quietLogger(t),
			MoreEdges: []string{edges[1].NodeAddr, edges[2].NodeAddr}})
	}
	for _, e := range edges {
		for i := range ups {
			e.WaitReady(t, fmt.Sprintf("n%d", i), waitLong)
		}
	}

	var killed atomic.Int32 // index+1 of the killed edge
	var whole, honest, dishonest atomic.Int64
	var mu sync.Mutex
	var firstDishonest string
	ctx, stop := context.WithTimeout(context.Background(), 4*time.Second)
	defer stop()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for w := range 24 {
		wg.Add(1)
		// Owner: the test. Stops when ctx ends.
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				i := rng.IntN(len(edges))
				if int(killed.Load()) == i+1 {
					continue
				}
				switch outcome, detail := streamOnce(client, edges[i].URL); outcome {
				case "whole":
					whole.Add(1)
				case "honest":
					honest.Add(1)
				default:
					dishonest.Add(1)
					mu.Lock()
					if firstDishonest == "" {
						firstDishonest = detail
					}
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(1200 * time.Millisecond)
	killed.Store(2)
	edges[1].Close() // its clients get their streams cut or refused: honest errors
	time.Sleep(800 * time.Millisecond)
	rs.Restart() // the ledger loses every lease; the nodes' gates still bound each backend
	wg.Wait()

	for i, u := range ups {
		if m := u.max.Load(); m > 4 {
			t.Errorf("backend %d had %d requests in flight, capacity 4", i, m)
		}
	}
	if dishonest.Load() > 0 {
		t.Errorf("%d answers were neither whole nor an honest error; first: %s", dishonest.Load(), firstDishonest)
	}
	if whole.Load() < 20 {
		t.Errorf("only %d whole streams (honest errors %d): the cluster barely served", whole.Load(), honest.Load())
	}
	t.Logf("whole %d, honest errors %d", whole.Load(), honest.Load())
	for _, i := range []int{0, 2} {
		e := edges[i]
		stack.WaitFor(t, waitLong, "every lease back", func() bool {
			for _, n := range e.Dispatcher.Status().Nodes {
				for _, p := range n.Providers {
					if p.InFlight != 0 {
						return false
					}
				}
			}
			held, err := e.Dispatcher.ClusterHeld(context.Background())
			if err != nil {
				return false
			}
			for _, n := range held {
				if n != 0 {
					return false
				}
			}
			return true
		})
	}
}

// streamOnce sends one streamed chat and classifies the answer: "whole"
// (200 ending in [DONE]), "honest" (an HTTP error status, an SSE error
// event without [DONE], or a transport error) or "dishonest" (a 200 stream
// that ended with neither [DONE] nor an error event).
func streamOnce(c *http.Client, base string) (string, string) {
	resp, err := c.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return "honest", err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return "honest", resp.Status
	}
	sc := bufio.NewScanner(resp.Body)
	sawError := false
	for sc.Scan() {
		line := sc.Text()
		if line == "data: [DONE]" {
			return "whole", ""
		}
		if strings.HasPrefix(line, `data: {"error"`) {
			sawError = true
		}
	}
	if sawError || sc.Err() != nil {
		return "honest", "error event or cut connection"
	}
	return "dishonest", "stream ended without [DONE] or an error event"
}
