package testhttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// SilentVLLM is a vLLM upstream (`/health`, `/metrics`,
// `/v1/chat/completions`) whose chat answers send nothing, not even a
// status, until the request ends: work in flight that has sent its caller
// nothing yet. hits counts the chat requests that reached it. Closed at
// the test's end.
func SilentVLLM(t testing.TB) (srv *httptest.Server, hits *atomic.Int32) {
	t.Helper()
	hits = new(atomic.Int32)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
		case "/metrics":
			_, _ = io.WriteString(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n")
		case "/v1/chat/completions":
			_, _ = io.Copy(io.Discard, r.Body)
			hits.Add(1)
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}
