package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/iop-gateway/iop/config"
)

// panicServer is a Server with two extra /v1 routes that panic: one before
// anything is written, one after the first event of a stream went out.
func panicServer(t *testing.T) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := &config.Edge{}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Config: cfg, Metrics: NewMetrics(reg)})
	s.engine.GET("/v1/boom", func(*gin.Context) { panic("boom") })
	s.engine.GET("/v1/boom-stream", func(c *gin.Context) {
		c.Header("Content-Type", "text/event-stream")
		_, _ = c.Writer.WriteString("data: {\"choices\":[]}\n\n")
		c.Writer.Flush()
		panic("boom after the first byte")
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, reg
}

// requestsByCode is iop_requests_total summed by its code label.
func requestsByCode(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "iop_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[labelValue(m, "code")] += m.GetCounter().GetValue()
		}
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A handler panic before anything was written is answered 500 in the
// OpenAI envelope, and counted as the 500 it was, not as a 200.
func TestPanicBeforeAnswerCountedAs500(t *testing.T) {
	srv, reg := panicServer(t)
	resp, err := srv.Client().Get(srv.URL + "/v1/boom")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var env struct {
		Error struct{ Type, Code string } `json:"error"`
	}
	if resp.StatusCode != http.StatusInternalServerError || json.Unmarshal(body, &env) != nil || env.Error.Type == "" {
		t.Fatalf("answer %d %s, want 500 in the OpenAI envelope", resp.StatusCode, body)
	}
	if got := requestsByCode(t, reg); got["500"] != 1 || len(got) != 1 {
		t.Errorf("iop_requests_total by code = %v, want only 500: 1", got)
	}
}

// A handler panic after the answer started breaks the connection, so the
// client cannot take the cut answer for a whole one (a chunked body ended
// cleanly reads as complete), and the request is counted as a 500.
func TestPanicAfterFirstByteBreaksTheAnswer(t *testing.T) {
	srv, reg := panicServer(t)
	resp, err := srv.Client().Get(srv.URL + "/v1/boom-stream")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !bytes.HasPrefix(body, []byte("data: ")) {
		t.Fatalf("first event not relayed: %q", body)
	}
	if err == nil {
		t.Errorf("the cut answer ended cleanly (%d bytes, status %d): want a read error", len(body), resp.StatusCode)
	}
	if got := requestsByCode(t, reg); got["500"] != 1 || len(got) != 1 {
		t.Errorf("iop_requests_total by code = %v, want only 500: 1", got)
	}
}
