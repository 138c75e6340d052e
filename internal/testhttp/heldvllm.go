package testhttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// HeldVLLM is a vLLM upstream (`/health`, `/metrics`, `/v1/chat/completions`)
// whose streamed chat answers send their first chunk ("Hel"), then hold
// until Free is called (or the request ends), then finish ("lo", [DONE]):
// an answer in flight for as long as a test needs one.
type HeldVLLM struct {
	*httptest.Server
	// Hits counts the chat requests that reached it.
	Hits    atomic.Int32
	release chan struct{}
	once    sync.Once
}

// Free lets every held answer (and every later one) finish.
func (u *HeldVLLM) Free() { u.once.Do(func() { close(u.release) }) }

// StartHeldVLLM starts a HeldVLLM, freed and closed at the test's end.
func StartHeldVLLM(t testing.TB) *HeldVLLM {
	t.Helper()
	u := &HeldVLLM{release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			return
		case "/metrics":
			_, _ = io.WriteString(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n")
			return
		case "/v1/chat/completions":
		default:
			http.NotFound(w, r)
			return
		}
		u.Hits.Add(1)
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"t","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-u.release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"t","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	t.Cleanup(u.Close)
	t.Cleanup(u.Free) // runs first: a held answer would hold Close
	return u
}
