package edgeapp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// answeringVLLM is a provider for clusterResponsesCfg whose /v1/responses
// answers are answer's (the request body read first): healthy, 404 for
// any other path, closed when t ends. Its store is unused; answer says
// what the provider remembers.
func answeringVLLM(t *testing.T, name string, answer http.HandlerFunc) *storingVLLM {
	t.Helper()
	v := &storingVLLM{name: name, store: map[string]bool{}, Server: httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(http.StatusOK)
			return
		case "/v1/responses":
		default:
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		answer(w, r)
	}))}
	t.Cleanup(v.Close)
	return v
}
