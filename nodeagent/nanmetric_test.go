package nodeagent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/llamacpp"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// llama-server with slots disabled reports its load on /metrics; a gauge
// that is NaN (Prometheus text allows it; e.g. a ratio over a zero-sized
// cache) must not break the node's "providers" command for every provider.
func TestNonFiniteMetricKeepsProvidersCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = io.WriteString(w, `{"status":"ok"}`)
		case "/slots":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusNotImplemented)
			_, _ = io.WriteString(w, `{"error":{"code":501,"message":"This server does not support slots endpoint.","type":"not_supported_error"}}`)
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = io.WriteString(w, "# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.\n# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio NaN\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 0\n# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 0\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	a := NewAgent(map[string]adapter.Factory{"llamacpp": llamacpp.New}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	if _, err := a.Apply(&iop.NodeConfigPayload{Adapters: []*iop.AdapterConfig{{Name: "lc", Type: "llamacpp", Capacity: 1, BaseUrl: srv.URL + "/v1"}}}, true); err != nil {
		t.Fatal(err)
	}
	resp := a.Command(context.Background(), CmdProviders)
	if resp.GetError() != "" {
		t.Fatalf("providers command failed: %s", resp.GetError())
	}
}
