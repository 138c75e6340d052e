package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/config"
)

// benchServer is a server with one model and no node: GET /v1/models is
// answered by the middleware chain and a small handler.
func benchServer(b *testing.B, origins []string) *Server {
	b.Helper()
	cfg := &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "a", Token: "t", Providers: []config.ProviderSpec{{Name: "p", Type: "mock"}}}},
		Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "p", Target: "x"}}}},
		CORS:   config.EdgeCORS{AllowedOrigins: origins},
	}
	if err := cfg.Normalize(); err != nil {
		b.Fatal(err)
	}
	return New(Options{Config: cfg, Metrics: NewMetrics(prometheus.NewRegistry())})
}

func benchModels(b *testing.B, s *Server, origin string) {
	req := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	h := s.Handler()
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
	}
}

// BenchmarkModelsCORSOff is the chain's cost per request with CORS off
// (the default): what every request pays.
func BenchmarkModelsCORSOff(b *testing.B) { benchModels(b, benchServer(b, nil), "https://a.example") }

// BenchmarkModelsCORSOn is the same from an allowed origin.
func BenchmarkModelsCORSOn(b *testing.B) {
	benchModels(b, benchServer(b, []string{"https://a.example"}), "https://a.example")
}
