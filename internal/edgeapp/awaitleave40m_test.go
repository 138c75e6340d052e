package edgeapp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
	"github.com/iop-gateway/iop/internal/testwait"
)

// A client that leaves while its answer waits for the id's write to
// Redis frees its slot at once, not at the end of the wait: the wait is
// bounded by the request's context as well as by the ledger's timeout
// (10 s here, Redis holding writes for 30 s). Both a held answer and a
// stream's first event.
func TestLeavingClientEndsTheIDWait40m(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "held", true: "stream"}[stream], func(t *testing.T) {
			rs := testredis.Start(t)
			rdb := rs.Client(t)
			a, b := newStoringVLLM(t, "a"), newStoringVLLM(t, "b")
			cfg := clusterResponsesCfg(rs.Addr, a, b)
			cfg.Cluster.Redis.LeaseTTLSec, cfg.Cluster.Redis.TimeoutMS = 50, 10000
			e := stack.StartEdge(t, cfg, stack.EdgeOptions{})
			stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "ta", Getenv: respEnv})
			e.WaitReady(t, "a", 10*time.Second)
			// Redis holds the edge's writes from the moment a begins to
			// answer (the lease was taken before): the id's write waits.
			pause := func() {
				if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
					t.Errorf("pause: %v", err)
				}
			}
			a.beforeNext.Store(&pause)
			t.Cleanup(func() { _ = rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := `{"model":"m","input":"Tell me more."` + map[bool]string{false: "", true: `,"stream":true`}[stream] + `}`
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/responses", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			ended := make(chan struct{})
			// Owner: this test; ends when cancel ends the request.
			go func() {
				defer close(ended)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			inFlight := func() int32 {
				for _, n := range e.Dispatcher.Status().Nodes {
					for _, p := range n.Providers {
						if n.ID == "a" && p.ProviderId == "v" {
							return p.InFlight
						}
					}
				}
				return -1
			}
			// The answer is in the edge, its id's write held by Redis.
			stack.WaitFor(t, 10*time.Second, "the id's write held", func() bool {
				for c := range strings.Lines(rdb.ClientList(context.Background()).Val()) {
					if strings.Contains(c, " flags=b ") && strings.Contains(c, " cmd=set ") {
						return true
					}
				}
				return false
			})
			if n := inFlight(); n != 1 {
				t.Fatalf("a/v in flight %d while the answer waits, want 1", n)
			}
			cancel()
			testwait.Recv(t, ended, 5*time.Second, "the client's request ended")
			// Well under the ledger's 10 s timeout.
			testwait.Until(t, 5*time.Second, 10*time.Millisecond, "a/v's slot freed once the client left", func() bool { return inFlight() == 0 })
		})
	}
}
