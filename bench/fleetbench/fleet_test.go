// Package fleetbench compares iop's routing strategies on a simulated vLLM
// fleet (bench/vllmsim): four backends with a KV cache too small to hold
// every hot system prompt, a multi-turn chat workload (bench/fleetload)
// whose conversations share a few dozen system prompts, and, as the outside
// reference, the same workload sent round robin straight to the backends
// (what an nginx upstream does). Run it with `make fleetbench`; the figures
// are in docs/routing.md.
package fleetbench

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/iop-gateway/iop/bench/fleetload"
	"github.com/iop-gateway/iop/bench/vllmsim"
	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

const (
	nodeID, token = "fleet", "fleet-token"
	backends      = 4
)

// sim: a 7B-class backend (vllmsim's defaults) whose KV cache holds 16k
// tokens, about 15 of the workload's system prompts; 20× faster than
// real time so a run takes seconds.
var sim = vllmsim.Config{Model: "sim", NumBlocks: 1024, TimeScale: 0.05}

// workload: 64 system prompts of ~1k tokens with a Zipf popularity, 3
// turns per conversation.
var workload = fleetload.Workload{
	Conversations: 192, Turns: 3, SystemPrompts: 64, SystemTokens: 1024, ZipfS: 1.1,
	UserTokensMin: 16, UserTokensMax: 48, MaxTokens: 32, Concurrency: 32, Seed: 7, Model: "m",
}

func startSims(b testing.TB) []string {
	b.Helper()
	var urls []string
	for range backends {
		s := vllmsim.New(sim)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
		// Owner: the benchmark (cleanup closes the server). Stops when
		// srv.Close makes Serve return.
		go func() { _ = srv.Serve(ln) }()
		b.Cleanup(func() {
			_ = srv.Close()
			s.Close()
		})
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls
}

// startIOP puts one edge and one node in front of the backends, model "m"
// routed by strategy.
func startIOP(b *testing.B, urls []string, strategy string) string {
	b.Helper()
	interval := 0.2
	spec := config.NodeSpec{ID: nodeID, Token: token, LoadReportIntervalSec: &interval}
	model := config.ModelSpec{Name: "m", Routing: strategy, QueueTimeoutSec: 120, MaxQueue: 4096}
	for i, u := range urls {
		name := "sim" + string(rune('a'+i))
		spec.Providers = append(spec.Providers, config.ProviderSpec{Name: name, Type: "vllm", BaseURL: u + "/v1", Capacity: 64})
		model.Providers = append(model.Providers, config.ModelProvider{Node: nodeID, Provider: name, Target: sim.Model})
	}
	cfg := &config.Edge{Log: config.Log{Level: "warn", Format: "json"}, Nodes: []config.NodeSpec{spec}, Models: []config.ModelSpec{model}}
	e := stack.StartEdge(b, cfg, stack.EdgeOptions{})
	stack.StartNode(b, e.NodeAddr, nodeID, stack.NodeOptions{Token: token})
	e.WaitReady(b, nodeID, 10*time.Second)
	return e.URL
}

// BenchmarkFleetRouting runs the workload once per strategy (use
// -benchtime 1x) and reports output tokens/s, TTFT p50/p99 and the
// fleet's prefix cache hit rate.
func BenchmarkFleetRouting(b *testing.B) {
	for _, strategy := range []string{"round_robin", "nginx", "ordered", "least_load", "prefix_affinity"} {
		b.Run(strategy, func(b *testing.B) {
			urls := startSims(b)
			base := ""
			switch strategy {
			case "round_robin":
			case "nginx":
				base = startNginx(b, urls)
			default:
				base = startIOP(b, urls, strategy)
			}
			client := fleetload.NewClient()
			b.Cleanup(client.CloseIdleConnections)
			ctx := context.Background()
			var res fleetload.Result
			var err error
			q0, h0, _ := fleetload.ScrapeHitRate(ctx, client, urls)
			b.ResetTimer()
			for range b.N {
				w := workload
				if strategy == "round_robin" || strategy == "nginx" {
					w.Model = sim.Model // no gateway maps the model name
				}
				if base == "" {
					res, err = fleetload.RunDirect(ctx, urls, w, client)
				} else {
					res, err = fleetload.Run(ctx, base, w, client)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			q1, h1, err := fleetload.ScrapeHitRate(ctx, client, urls)
			if err != nil {
				b.Fatal(err)
			}
			if res.Errors > 0 {
				b.Fatalf("%d errors: %v", res.Errors, res.FirstErrors)
			}
			b.ReportMetric(res.OutputTokensPerSec, "out_tok/s")
			b.ReportMetric(float64(res.TTFT.P50.Microseconds())/1000, "ttft_p50_ms")
			b.ReportMetric(float64(res.TTFT.P99.Microseconds())/1000, "ttft_p99_ms")
			b.ReportMetric(float64(res.Latency.P50.Microseconds())/1000, "e2e_p50_ms")
			if q := q1 - q0; q > 0 {
				b.ReportMetric((h1-h0)/q, "prefix_hit_rate")
			}
		})
	}
}
