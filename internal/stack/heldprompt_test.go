package stack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
)

// promptBody generates a chat completions request with a prompt of n bytes
// as it is read, so the client holds none of it while the answer streams.
type promptBody struct {
	head, tail *strings.Reader
	left       int
}

func newPromptBody(n int, tools bool) (*promptBody, int64) {
	head := `{"model":"m","stream":true,"messages":[{"role":"user","content":"`
	tail := `"}]}`
	if tools {
		tail = `"}],"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]}`
	}
	return &promptBody{head: strings.NewReader(head), tail: strings.NewReader(tail), left: n}, int64(len(head) + n + len(tail))
}

func (p *promptBody) Read(b []byte) (int, error) {
	if p.head.Len() > 0 {
		return p.head.Read(b)
	}
	if p.left > 0 {
		n := min(len(b), p.left)
		for i := range b[:n] {
			b[i] = 'x'
		}
		p.left -= n
		return n, nil
	}
	return p.tail.Read(b)
}

func (p *promptBody) Close() error { return nil }

// A held stream keeps nothing of its request: once the answer has started,
// neither the edge (the body it read, the parsed request) nor the node (the
// tunnel or run request, the upstream request and its body, the input a
// tool fallback would use) holds the prompt for the rest of the stream, on
// either path. With a 512 KiB prompt per stream, each held stream may add
// at most a quarter of that to the live heap of the whole deployment (edge,
// node, upstream and client in this process); holding the prompt on any
// side would add all of it.
func TestHeldStreamsKeepNoPrompt(t *testing.T) {
	// A chat request with tools to a vLLM provider goes down the run path
	// (its tool_mode is auto, so the adapter could fall back to text
	// tools); without, the tunnel. Ollama is always a run.
	t.Run("tunnel", func(t *testing.T) { testHeldStreamsKeepNoPrompt(t, "vllm", false) })
	t.Run("run", func(t *testing.T) { testHeldStreamsKeepNoPrompt(t, "vllm", true) })
	t.Run("ollama", func(t *testing.T) { testHeldStreamsKeepNoPrompt(t, "ollama", false) })
}

func testHeldStreamsKeepNoPrompt(t *testing.T, provider string, tools bool) {
	const (
		streams = 24
		prompt  = 512 << 10
	)
	release := make(chan struct{})
	// The upstream answers the first part of each answer, then holds it
	// until release: vLLM's SSE or Ollama's NDJSON, and the probes each
	// adapter makes.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var first, last string
		switch r.URL.Path {
		case "/health":
			return
		case "/metrics":
			_, _ = io.WriteString(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n")
			return
		case "/api/version":
			_, _ = io.WriteString(w, `{"version":"0.6.0"}`)
			return
		case "/api/tags":
			_, _ = io.WriteString(w, `{"models":[{"name":"t","model":"t"}]}`)
			return
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			first = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"t\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"
			last = "data: [DONE]\n\n"
		case "/api/chat":
			w.Header().Set("Content-Type", "application/x-ndjson")
			first = `{"model":"t","created_at":"2026-12-04T00:00:00Z","message":{"role":"assistant","content":"hi"},"done":false}` + "\n"
			last = `{"model":"t","created_at":"2026-12-04T00:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":1}` + "\n"
		default:
			http.NotFound(w, r)
			return
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, last)
	}))
	defer up.Close()
	baseURL := up.URL + "/v1"
	if provider == "ollama" {
		baseURL = up.URL
	}

	e := StartEdge(t, &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "ta", Providers: []config.ProviderSpec{
			{Name: "v", Type: provider, BaseURL: baseURL, Capacity: streams + 1},
		}}},
		Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "v", Target: "t"}}}},
	}, EdgeOptions{})
	StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	e.WaitReady(t, "a", 10*time.Second)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var closeRelease sync.Once
	defer closeRelease.Do(func() { close(release) })
	// open starts one stream and returns once its first event has arrived;
	// the stream stays open until release, its body closed after.
	open := func(n int) error {
		body, size := newPromptBody(n, tools)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions", body)
		if err != nil {
			return err
		}
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		if resp.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(line, "data: ") {
			_ = resp.Body.Close()
			return fmt.Errorf("status %d, first line %q, %v", resp.StatusCode, line, err)
		}
		wg.Add(1)
		// Owner: the test; ends when the upstream is released (the
		// stream ends) or ctx is cancelled.
		go func() {
			defer wg.Done()
			_, _ = io.Copy(io.Discard, br)
			_ = resp.Body.Close()
		}()
		return nil
	}
	// One stream first, so that connections, pools and caches exist
	// before the baseline is taken.
	if err := open(prompt); err != nil {
		t.Fatalf("warm-up stream: %v", err)
	}
	base := heapInUse()
	for i := range streams {
		if err := open(prompt); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	held := heapInUse()
	perStream := (int64(held) - int64(base)) / streams
	t.Logf("live heap %d → %d bytes with %d more held streams: %d bytes per stream (prompt %d)", base, held, streams, perStream, prompt)
	if perStream > prompt/4 {
		t.Fatalf("each held stream adds %d bytes to the live heap; its prompt is %d: a side keeps the request for the stream's life", perStream, prompt)
	}
	closeRelease.Do(func() { close(release) })
}
