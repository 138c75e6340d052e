package fleetbench

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
)

// BenchmarkClusterLease measures what sharing leases through Redis adds to
// a request: the same non-streamed chat, answered by the node's mock
// provider (no backend, so the gateway is all there is), through a lone
// edge and through an edge of a two-edge cluster on a loopback Redis. Run
// both in one `go test -bench ClusterLease` and compare ns/op.
//
// The -parallel variants send from 8 goroutines at once (b.RunParallel with
// SetParallelism(4) on 2 cores): their ns/op is the inverse of throughput.
// The -queued variants give the provider a capacity of 2, so that most
// requests queue and are served by a lease handed on at a release.
func BenchmarkClusterLease(b *testing.B) {
	for _, mode := range []string{"single", "redis", "single-parallel", "redis-parallel", "single-queued-parallel", "redis-queued-parallel"} {
		b.Run(mode, func(b *testing.B) {
			parallel := strings.HasSuffix(mode, "-parallel")
			capacity := 64
			if strings.Contains(mode, "-queued") {
				capacity = 2
			}
			cfg := func() *config.Edge {
				return &config.Edge{
					Log: config.Log{Level: "warn", Format: "json"},
					Nodes: []config.NodeSpec{{ID: nodeID, Token: token,
						Providers: []config.ProviderSpec{{Name: "mock", Type: "mock", Capacity: capacity}}}},
					Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: nodeID, Provider: "mock", Target: "x"}}}},
				}
			}
			var edges []*stack.Edge
			if strings.HasPrefix(mode, "single") {
				edges = append(edges, stack.StartEdge(b, cfg(), stack.EdgeOptions{}))
			} else {
				rs := testredis.Start(b)
				for range 2 {
					c := cfg()
					c.Cluster.Redis = config.ClusterRedis{Address: rs.Addr}
					edges = append(edges, stack.StartEdge(b, c, stack.EdgeOptions{}))
				}
			}
			var more []string
			for _, e := range edges[1:] {
				more = append(more, e.NodeAddr)
			}
			stack.StartNode(b, edges[0].NodeAddr, nodeID, stack.NodeOptions{Token: token, MoreEdges: more})
			for _, e := range edges {
				e.WaitReady(b, nodeID, 10*time.Second)
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			b.Cleanup(client.CloseIdleConnections)
			url := edges[0].URL + "/v1/chat/completions"
			body := `{"model":"m","messages":[{"role":"user","content":"one two three"}]}`
			one := func() error {
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return nil
			}
			b.ResetTimer()
			if !parallel {
				for range b.N {
					if err := one(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := one(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
