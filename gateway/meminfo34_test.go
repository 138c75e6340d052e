package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/config"
)

// probeServer is a server with a GET /v1/probe34 route (global middleware
// only) that reports what its handler saw.
func probeServer(t *testing.T, seen func(c *gin.Context)) *Server {
	t.Helper()
	cfg := &config.Edge{}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Config: cfg, Metrics: NewMetrics(prometheus.NewRegistry())})
	s.engine.GET("/v1/probe34", func(c *gin.Context) {
		seen(c)
		c.Status(http.StatusNoContent)
	})
	return s
}

// A request served as the edge serves it (Handler, over a real socket)
// keeps its reqInfo beside its writer, not in gin's Keys: that map was
// ~690 B of every held stream. The handler still finds it, the access
// log's request id included, and http.ResponseController still reaches
// the connection through the wrapper (readDeadline's body deadline).
func TestRequestInfoKeptOutOfGinKeys(t *testing.T) {
	var keys int
	var id string
	var deadlineErr error
	s := probeServer(t, func(c *gin.Context) {
		keys, id = len(c.Keys), info(c).requestID
		deadlineErr = http.NewResponseController(c.Writer).SetWriteDeadline(time.Time{})
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/v1/probe34")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if keys != 0 {
		t.Errorf("gin Keys holds %d entries, want none", keys)
	}
	if got := resp.Header.Get("X-Request-Id"); id == "" || got != id {
		t.Errorf("reqInfo request id %q, answer's X-Request-Id %q", id, got)
	}
	if deadlineErr != nil {
		t.Errorf("write deadline through the wrapper: %v", deadlineErr)
	}
}

// The router served without Handler (no infoWriter) still gives every
// request its reqInfo, in gin's Keys.
func TestRequestInfoWithoutWrapper(t *testing.T) {
	var id string
	s := probeServer(t, func(c *gin.Context) { id = info(c).requestID })
	w := httptest.NewRecorder()
	s.engine.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/probe34", nil))
	if got := w.Header().Get("X-Request-Id"); id == "" || got != id {
		t.Fatalf("reqInfo request id %q, answer's X-Request-Id %q", id, got)
	}
}
