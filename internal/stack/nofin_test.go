package stack

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// A node that answers every exchange completely (STATUS, BODY, END) but
// never half-closes its streams must not make the edge keep them: the edge
// releases a finished exchange's stream itself after a short linger. Over
// 3,000 such requests the edge's heap may not grow by more than 50 MB, and
// its stream table returns to (about) empty.
func TestNodeThatNeverHalfClosesDoesNotLeak(t *testing.T) {
	const requests = 3000
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "tok-a", Providers: []config.ProviderSpec{
			{Name: "p", Type: "vllm", BaseURL: "http://127.0.0.1:1/v1", Capacity: 64}}}},
		Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "p", Target: "t"}}}},
	}
	e := StartEdge(t, cfg, EdgeOptions{})
	fn := startFakeNode(t, e.NodeAddr, "a", "tok-a")
	e.WaitReady(t, "a", 10*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Owner: the test; ends with ctx. It answers each exchange in full and
	// never closes its side of the stream.
	go func() {
		for {
			var ns nodeStream
			select {
			case ns = <-fn.streams:
			case <-ctx.Done():
				return
			}
			runID := ns.first.GetProviderTunnelRequest().GetRunId()
			body := strings.Repeat("x", 64<<10) // 64 KiB per answer
			for i, f := range []*iop.ProviderTunnelFrame{
				{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200, Headers: []*iop.Header{{Name: "Content-Type", Value: "application/json"}}},
				{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte(`{"b":"` + body + `"}`)},
				{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true},
			} {
				f.RunId, f.Sequence = runID, uint64(i+1)
				_ = ns.st.Send(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: f}})
			}
			_ = ns.st.Flush()
			// ns.done is never closed by the exchange: the handler keeps
			// the stream open (no FIN) until the test ends.
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	post := func() {
		resp, err := client.Post(e.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	for range 50 { // warm up pools and caches
		post()
	}
	before := heapInUse()
	for range requests {
		post()
	}
	// Finished streams are released after the linger.
	open := func() int { st, _ := e.Dispatcher.NodeTransport("a"); return st.StreamsOpen }
	WaitFor(t, 30*time.Second, "the edge to release finished streams", func() bool { return open() <= 2 })
	after := heapInUse()
	growth := int64(after) - int64(before)
	t.Logf("heap growth over %d requests to a node that never half-closes: %.1f MB (%d streams open)", requests, float64(growth)/(1<<20), open())
	if growth > 50<<20 {
		t.Fatalf("heap grew by %.1f MB (goal < 50 MB)", float64(growth)/(1<<20))
	}
}
