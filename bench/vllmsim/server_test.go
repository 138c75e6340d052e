package vllmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast is a simulator config running 1000x faster than the modelled GPU.
var fast = Config{Model: "m", TimeScale: 0.001}

func startSim(t *testing.T, c Config) (*Server, *httptest.Server) {
	t.Helper()
	sim := New(c)
	srv := httptest.NewServer(sim)
	t.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	return sim, srv
}

func postChat(ctx context.Context, url, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 5*time.Second, time.Millisecond, what, cond)
}

func TestStreamFraming(t *testing.T) {
	sim, srv := startSim(t, fast)
	resp, err := postChat(t.Context(), srv.URL, `{"model":"m","messages":[{"role":"user","content":"hi there"}],`+
		`"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Fatalf("content type %q", ct)
	}
	prompt := tokenize([]message{{"user", "hi there"}})
	seed := promptSeed(prompt)
	id := sim.handler.idPrefix + "1"
	head := fmt.Sprintf(`data: {"id":"%s","object":"chat.completion.chunk","created":%d,"model":"m","choices":[{"index":0,`, id, sim.created)
	want := head + `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `"delta":{"content":"` + answerText(seed, 0) + `"},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `"delta":{"content":"` + answerText(seed, 1) + `"},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `"delta":{"content":"` + answerText(seed, 2) + `"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}` + "\n\n" +
		fmt.Sprintf(`data: {"id":"%s","object":"chat.completion.chunk","created":%d,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":3}}`,
			id, sim.created, len(prompt), len(prompt)+3) + "\n\n" +
		"data: [DONE]\n\n"
	if string(body) != want {
		t.Fatalf("stream:\n%s\nwant:\n%s", body, want)
	}
}

func TestOpenAIClientDecodes(t *testing.T) {
	_, srv := startSim(t, fast)
	cfg := openai.DefaultConfig("none")
	cfg.BaseURL = srv.URL + "/v1"
	cl := openai.NewClientWithConfig(cfg)
	req := openai.ChatCompletionRequest{
		Model:         "m",
		Messages:      []openai.ChatCompletionMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "what is a gateway"}},
		MaxTokens:     20,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	st, err := cl.CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var text strings.Builder
	var usage *openai.Usage
	finish := openai.FinishReason("")
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if usage == nil || usage.CompletionTokens != 20 || finish != openai.FinishReasonLength {
		t.Fatalf("usage %+v finish %q", usage, finish)
	}
	// The same prompt answers the same text without streaming.
	req.Stream, req.StreamOptions = false, nil
	got, err := cl.CreateChatCompletion(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != text.String() || got.Usage.CompletionTokens != 20 || got.Usage.PromptTokens != usage.PromptTokens {
		t.Fatalf("non-stream %q %+v, stream %q %+v", got.Choices[0].Message.Content, got.Usage, text.String(), usage)
	}
	if n := len(appendText(nil, text.String())); n != 20 {
		t.Fatalf("answer tokenizes to %d tokens, want 20", n)
	}
}

func TestMetricsParse(t *testing.T) {
	sim, srv := startSim(t, Config{Model: `sim "7b"`, TimeScale: 0.001})
	sys := strings.Repeat("you are a helpful assistant for routing questions ", 8)
	for _, u := range []string{"one", "two"} {
		body, _ := json.Marshal(map[string]any{"model": `sim "7b"`, "max_tokens": 2,
			"messages": []map[string]string{{"role": "system", "content": sys}, {"role": "user", "content": u}}})
		resp, err := postChat(t.Context(), srv.URL, string(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name, typ string) float64 {
		t.Helper()
		f, ok := fams[name]
		if !ok || len(f.Metric) != 1 || strings.ToLower(f.GetType().String()) != typ {
			t.Fatalf("family %s: %v", name, f)
		}
		m := f.Metric[0]
		for _, l := range m.Label {
			if l.GetName() == "model_name" && l.GetValue() != `sim "7b"` {
				t.Fatalf("%s model_name %q", name, l.GetValue())
			}
		}
		if typ == "counter" {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	for _, g := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} {
		if v := value(g, "gauge"); v != 0 {
			t.Fatalf("%s = %v when idle", g, v)
		}
	}
	st := sim.Stats()
	q, h := value("vllm:prefix_cache_queries_total", "counter"), value("vllm:prefix_cache_hits_total", "counter")
	if q != float64(st.PrefixQueries) || h != float64(st.PrefixHits) || h <= 0 || h >= q {
		t.Fatalf("prefix cache queries %v hits %v, stats %+v", q, h, st)
	}
	if v := value("vllm:generation_tokens_total", "counter"); v != 4 {
		t.Fatalf("generation tokens %v, want 4", v)
	}
}

func TestQueueBoundAndDisconnect(t *testing.T) {
	// Real-time steps: a 1000-token answer keeps the one slot busy.
	sim, srv := startSim(t, Config{Model: "m", MaxNumSeqs: 1, MaxWaiting: 1})
	body := `{"messages":[{"role":"user","content":"long story"}],"max_tokens":1000,"stream":true}`
	ctx1, cancel1 := context.WithCancel(t.Context())
	defer cancel1()
	r1, err := postChat(ctx1, srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Body.Close()
	waitFor(t, "first running", func() bool { return sim.Stats().Running == 1 })
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	r2, err := postChat(ctx2, srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Body.Close()
	waitFor(t, "second waiting", func() bool { return sim.Stats().Waiting == 1 })
	r3, err := postChat(t.Context(), srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r3.Body)
	r3.Body.Close()
	if r3.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: status %d, want 429", r3.StatusCode)
	}
	if st := sim.Stats(); st.KVUsage == 0 || st.Rejected != 1 {
		t.Fatalf("stats %+v", st)
	}
	cancel1()
	cancel2()
	waitFor(t, "aborts", func() bool {
		st := sim.Stats()
		return st.Aborted == 2 && st.Running == 0 && st.Waiting == 0 && st.KVUsage == 0
	})
}

func TestRejects(t *testing.T) {
	_, srv := startSim(t, Config{Model: "m", MaxModelLen: 64, TimeScale: 0.001})
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"model":"other","messages":[{"role":"user","content":"x"}]}`, http.StatusNotFound},
		{`{"messages":[]}`, http.StatusBadRequest},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":100}`, http.StatusBadRequest},
		{`{"messages":[{"role":"user","content":7}]}`, http.StatusBadRequest},
		{`not json`, http.StatusBadRequest},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"max_tokens":2}`, http.StatusOK},
	} {
		resp, err := postChat(t.Context(), srv.URL, c.body)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Error *struct{ Message string } `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode != c.code || err != nil || (c.code != http.StatusOK) != (doc.Error != nil) {
			t.Fatalf("%s: status %d (want %d), decode %v, error %+v", c.body, resp.StatusCode, c.code, err, doc.Error)
		}
	}
	for _, p := range []string{"/health", "/v1/models"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || (p == "/v1/models" && !strings.Contains(string(b), `"id":"m"`)) {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, b)
		}
	}
}

func TestCloseEndsStreams(t *testing.T) {
	sim := New(Config{Model: "m"})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	resp, err := postChat(t.Context(), srv.URL, `{"messages":[{"role":"user","content":"x"}],"max_tokens":1000,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitFor(t, "running", func() bool { return sim.Stats().Running == 1 })
	sim.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "[DONE]") {
		t.Fatal("stream completed although the server closed")
	}
	sim.Close() // twice is fine
	r2, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("health after close: %d", r2.StatusCode)
	}
}

// flushRecorder records a response and reports each Flush on flushed, so a
// test can step a streaming handler without sharing its buffer unguarded.
type flushRecorder struct {
	hdr     http.Header
	body    strings.Builder // written by the handler only; read after it returns
	flushed chan struct{}   // capacity 1
}

func (f *flushRecorder) Header() http.Header         { return f.hdr }
func (f *flushRecorder) WriteHeader(int)             {}
func (f *flushRecorder) Write(p []byte) (int, error) { return f.body.Write(p) }
func (f *flushRecorder) Flush() {
	select {
	case f.flushed <- struct{}{}:
	default:
	}
}

// TestStreamFinishWhenTokensPrecedeFinished pins the interleaving where the
// handler sees every token emitted but finished not yet stored (the engine
// stores emitted first): the last token must still carry finish_reason.
func TestStreamFinishWhenTokensPrecedeFinished(t *testing.T) {
	sim := New(fast)
	defer sim.Close()
	q := &seq{maxTokens: 2, notify: make(chan struct{}, 1)}
	q.emitted.Store(2)
	rec := &flushRecorder{hdr: http.Header{}, flushed: make(chan struct{}, 1)}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	done := make(chan struct{})
	// Owner: this test; stops when stream writes [DONE] after the signal below.
	go func() {
		defer close(done)
		sim.handler.stream(rec, req, q, "id", false)
	}()
	// The stream writes both tokens, flushes, then waits for the signal.
	select {
	case <-rec.flushed:
	case <-done:
		t.Fatal("stream ended before finished was stored")
	case <-time.After(5 * time.Second):
		t.Fatal("stream never flushed")
	}
	q.finished.Store(true)
	q.signal()
	<-done
	body := rec.body.String()
	if n := strings.Count(body, `"finish_reason":"length"`); n != 1 {
		t.Fatalf("%d finish_reason length chunks in:\n%s", n, body)
	}
	if !strings.HasSuffix(body, `"finish_reason":"length","stop_reason":null}]}`+"\n\ndata: [DONE]\n\n") {
		t.Fatalf("last token does not carry finish_reason:\n%s", body)
	}
}
