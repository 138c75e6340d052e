package fleetload

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/iop-gateway/iop/bench/vllmsim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startSims(t *testing.T, n int, c vllmsim.Config) ([]*vllmsim.Server, []string) {
	t.Helper()
	var sims []*vllmsim.Server
	var urls []string
	for range n {
		sim := vllmsim.New(c)
		srv := httptest.NewServer(sim)
		t.Cleanup(func() {
			srv.Close()
			sim.Close()
		})
		sims = append(sims, sim)
		urls = append(urls, srv.URL)
	}
	return sims, urls
}

// sim runs 500x faster than the modelled A100.
var simCfg = vllmsim.Config{TimeScale: 0.002}

var tiny = Workload{
	Conversations: 12,
	Turns:         3,
	SystemPrompts: 2,
	SystemTokens:  80,
	UserTokensMin: 4,
	UserTokensMax: 12,
	MaxTokens:     8,
	Concurrency:   4,
	Seed:          42,
}

func TestRunDirectRoundRobin(t *testing.T) {
	sims, urls := startSims(t, 2, simCfg)
	cl := NewClient()
	defer cl.CloseIdleConnections()
	res, err := RunDirect(t.Context(), urls, tiny, cl)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Errors != 0 || res.Skipped != 0 || res.Requests != 36 {
		t.Fatalf("requests %d errors %d skipped %d: %v", res.Requests, res.Errors, res.Skipped, res.FirstErrors)
	}
	if res.OutputTokens != 36*8 || res.OutputTokensPerSec <= 0 || res.PromptTokens <= 36*80 {
		t.Fatalf("tokens: out %d (%.0f/s) prompt %d", res.OutputTokens, res.OutputTokensPerSec, res.PromptTokens)
	}
	if res.TTFT.N != 36 || res.TTFT.P50 <= 0 || res.TTFT.P99 < res.TTFT.P50 || res.Latency.P50 < res.TTFT.P50 ||
		res.Latency.P99 < res.TTFT.P99 || res.Latency.Max > res.Elapsed {
		t.Fatalf("ttft %+v latency %+v elapsed %v", res.TTFT, res.Latency, res.Elapsed)
	}
	var hitsInStats int64
	for i, s := range sims {
		st := s.Stats()
		if st.Finished != 18 || res.PerTarget[urls[i]] != 18 {
			t.Fatalf("backend %d: finished %d, sent %d; want 18 each (round robin)", i, st.Finished, res.PerTarget[urls[i]])
		}
		hitsInStats += st.PrefixHits
	}
	q, h, err := ScrapeHitRate(t.Context(), cl, urls)
	if err != nil {
		t.Fatal(err)
	}
	if h <= 0 || h >= q || h != float64(hitsInStats) {
		t.Fatalf("scraped queries %v hits %v, stats hits %d", q, h, hitsInStats)
	}
	t.Logf("round robin over 2: hit rate %.2f", h/q)
}

func TestRunOneBackendReusesConversations(t *testing.T) {
	_, urls := startSims(t, 1, simCfg)
	res, err := Run(t.Context(), urls[0], tiny, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Requests != 36 || res.PerTarget[urls[0]] != 36 {
		t.Fatalf("%v %v", res, res.FirstErrors)
	}
	q, h, err := ScrapeHitRate(t.Context(), nil, urls)
	if err != nil {
		t.Fatal(err)
	}
	// Everything on one backend: later turns find the whole conversation so
	// far cached, and the 2 system prompts are shared by 12 conversations.
	if h/q < 0.6 {
		t.Fatalf("hit rate %.2f on a single backend, want > 0.6", h/q)
	}
}

func TestErrorsAndSkippedTurns(t *testing.T) {
	// The third turn no longer fits a 160-token context.
	_, urls := startSims(t, 1, vllmsim.Config{TimeScale: 0.002, MaxModelLen: 160})
	w := tiny
	w.Conversations, w.UserTokensMin, w.UserTokensMax, w.MaxTokens = 4, 20, 20, 20
	res, err := Run(t.Context(), urls[0], w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.Errors+res.Requests+res.Skipped != 12 || len(res.FirstErrors) == 0 {
		t.Fatalf("%v %v", res, res.FirstErrors)
	}
}

func TestCancelAndInvalid(t *testing.T) {
	_, urls := startSims(t, 1, vllmsim.Config{}) // real time: slow
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := RunDirect(ctx, urls, tiny, nil)
	if !errors.Is(err, context.Canceled) || res.Errors != 0 {
		t.Fatalf("cancelled run: %v, %d errors", err, res.Errors)
	}
	for _, w := range []Workload{{ZipfS: 0.5}, {UserTokensMin: 10, UserTokensMax: 5}, {Turns: -1}} {
		if _, err := Run(t.Context(), urls[0], w, nil); !errors.Is(err, ErrWorkload) {
			t.Fatalf("%+v: %v, want ErrWorkload", w, err)
		}
	}
	if _, err := RunDirect(t.Context(), nil, tiny, nil); !errors.Is(err, ErrWorkload) {
		t.Fatalf("no backends: %v", err)
	}
}

func TestParseSample(t *testing.T) {
	for _, c := range []struct {
		line string
		name string
		v    float64
		ok   bool
	}{
		{`vllm:prefix_cache_hits_total{engine="0",model_name="a}b \"c\""} 12.0`, "vllm:prefix_cache_hits_total", 12, true},
		{`x 3 1700000000`, "x", 3, true},
		{`# TYPE x counter`, "", 0, false},
		{`x{a="1" 3`, "", 0, false},
		{`x{} nope`, "", 0, false},
	} {
		n, v, ok := parseSample(c.line)
		if n != c.name || v != c.v || ok != c.ok {
			t.Fatalf("%q: %q %v %v", c.line, n, v, ok)
		}
	}
}

func TestFastContent(t *testing.T) {
	for _, c := range []struct {
		data string
		text string
		ok   bool
	}{
		{`{"id":"x","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}`, " the", true},
		{`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, "", false},
		{`{"choices":[{"index":0,"delta":{"content":""}}]}`, "", false},
		{`{"choices":[{"index":0,"delta":{"content":"a\"b"}}]}`, "", false},
		{`{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`, "", false},
		{`{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"completion_tokens":1}}`, "", false},
	} {
		text, ok := fastContent([]byte(c.data))
		if text != c.text || ok != c.ok {
			t.Fatalf("%s: %q %v", c.data, text, ok)
		}
	}
}
