package stack

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/internal/testredis"
)

func clusterCfg(redisAddr string) *config.Edge {
	c := oneNodeCluster()
	c.Nodes[0].Providers[0].Capacity = 2
	c.Nodes[0].Providers[0].Extra = map[string]any{"delay_ms": 1500}
	c.Models[0].QueueTimeoutSec = 20
	c.Cluster.Redis = config.ClusterRedis{Address: redisAddr, LeaseTTLSec: 2, TimeoutMS: 300}
	return c
}

func postAsync(url string) <-chan int {
	ch := make(chan int, 1)
	// Owner: the test; ends with the request.
	go func() {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json",
			bytes.NewReader([]byte(`{"model":"demo","messages":[{"role":"user","content":"a b c"}]}`)))
		if err != nil {
			ch <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		ch <- resp.StatusCode
	}()
	return ch
}

// Two edges share a provider of capacity 2 through Redis: while one edge
// holds both slots the other queues its request (the node's own gate
// would refuse a third), and serves it once a slot is returned. With Redis
// gone an edge answers 503 cluster_unavailable at once, and recovers by
// itself when Redis is back.
func TestEdgesShareCapacityThroughRedis(t *testing.T) {
	rs := testredis.Start(t)
	ea := StartEdge(t, clusterCfg(rs.Addr), EdgeOptions{})
	eb := StartEdge(t, clusterCfg(rs.Addr), EdgeOptions{})
	StartNode(t, ea.NodeAddr, "a", NodeOptions{Token: "ta", MoreEdges: []string{eb.NodeAddr}})
	ea.WaitReady(t, "a", 10*time.Second)
	eb.WaitReady(t, "a", 10*time.Second)

	a1, a2 := postAsync(ea.URL), postAsync(ea.URL)
	WaitFor(t, 5*time.Second, "edge a holds both slots", func() bool {
		held, err := eb.Dispatcher.ClusterHeld(context.Background())
		return err == nil && held["a/m"] == 2
	})
	b := postAsync(eb.URL)
	WaitFor(t, 5*time.Second, "edge b queues its request", func() bool {
		return eb.Dispatcher.Status().Models[0].Pending == 1
	})
	// Any edge's status shows the cluster: a's two leases, b's waiter.
	WaitFor(t, 5*time.Second, "the cluster status on edge a", func() bool {
		cs := ea.Dispatcher.Cluster(context.Background())
		return cs != nil && cs.Reachable && cs.InFlight["a/m"] == 2 && cs.Pending["demo"] == 1
	})
	for _, ch := range []<-chan int{a1, a2, b} {
		select {
		case code := <-ch:
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("a request never finished")
		}
	}
	WaitFor(t, 5*time.Second, "every slot back", func() bool {
		held, err := ea.Dispatcher.ClusterHeld(context.Background())
		return err == nil && held["a/m"] == 0
	})

	rs.Stop()
	start := time.Now()
	resp, err := http.Post(eb.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "cluster_unavailable") {
		t.Fatalf("redis down: %d %s", resp.StatusCode, body)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("redis down answered after %s", waited)
	}
	rs.Restart()
	WaitFor(t, 10*time.Second, "served again once redis is back", func() bool {
		return <-postAsync(eb.URL) == http.StatusOK
	})
}

// Across edges the older waiter goes first: with the one slot held on
// edge a, a request queued on edge b and then a younger one on edge a,
// the slot a frees goes to b's waiter, although a's own queue would have
// taken it.
func TestOlderWaiterOfAnotherEdgeGoesFirst(t *testing.T) {
	rs := testredis.Start(t)
	cfg := func() *config.Edge {
		c := clusterCfg(rs.Addr)
		c.Nodes[0].Providers[0].Capacity = 1
		// Redis down is not what this test is about: each call gets 2 s,
		// not clusterCfg's 300 ms, which a Take under -race on a loaded
		// box outlasted (Acquire failed with ErrUnavailable). A timeout
		// may be at most a fifth of the lease TTL.
		c.Cluster.Redis.TimeoutMS, c.Cluster.Redis.LeaseTTLSec = 2000, 10
		return c
	}
	ea, eb := StartEdge(t, cfg(), EdgeOptions{}), StartEdge(t, cfg(), EdgeOptions{})
	StartNode(t, ea.NodeAddr, "a", NodeOptions{Token: "ta", MoreEdges: []string{eb.NodeAddr}})
	ea.WaitReady(t, "a", 10*time.Second)
	eb.WaitReady(t, "a", 10*time.Second)
	ctx := context.Background()
	held, err := ea.Dispatcher.Acquire(ctx, dispatch.Request{Model: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		edge string
		l    *dispatch.Lease
	}
	order := make(chan got, 2)
	acquire := func(e *Edge, name string) {
		// Owner: the test; ends with the grant or the queue timeout.
		go func() {
			l, err := e.Dispatcher.Acquire(ctx, dispatch.Request{Model: "demo"})
			if err != nil {
				t.Error(err)
			}
			order <- got{name, l}
		}()
	}
	acquire(eb, "b")
	WaitFor(t, 5*time.Second, "b's waiter queued", func() bool { return eb.Dispatcher.Status().Models[0].Pending == 1 })
	time.Sleep(300 * time.Millisecond) // b's waiter is registered and older by more than the slack
	acquire(ea, "a")
	WaitFor(t, 5*time.Second, "a's waiter queued", func() bool { return ea.Dispatcher.Status().Models[0].Pending == 1 })
	held.Release(dispatch.ReasonCompleted)
	first := <-order
	if first.edge != "b" {
		t.Fatalf("edge %s's younger waiter was served first", first.edge)
	}
	first.l.Release(dispatch.ReasonCompleted)
	second := <-order
	second.l.Release(dispatch.ReasonCompleted)
}
