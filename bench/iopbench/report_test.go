//go:build linux

package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Percentiles are nearest-rank: of 1..100 ms the p99 is 99 ms (not the
// maximum) and the p50 50 ms; of 1..1000 ms the p99 is 990 ms.
func TestSummarizeNearestRank(t *testing.T) {
	for _, c := range []struct {
		n             int
		p50, p99, max time.Duration
	}{
		{1, 1, 1, 1},
		{2, 1, 2, 2},
		{100, 50, 99, 100},
		{150, 75, 149, 150},
		{1000, 500, 990, 1000},
	} {
		d := make([]time.Duration, c.n)
		for i := range d {
			d[c.n-1-i] = time.Duration(i+1) * time.Millisecond // reversed: summarize sorts
		}
		s := summarize(d)
		if s.N != c.n || s.P50 != c.p50*time.Millisecond || s.P99 != c.p99*time.Millisecond || s.Max != c.max*time.Millisecond {
			t.Errorf("%d samples: n %d p50 %v p99 %v max %v, want p50 %d ms p99 %d ms max %d ms", c.n, s.N, s.P50, s.P99, s.Max, c.p50, c.p99, c.max)
		}
	}
	if s := summarize(nil); s != (summary{}) {
		t.Errorf("no samples: %+v", s)
	}
}

// c=1 requests that failed are left out of the latencies; the report says
// how many there were, as it does for c=32.
func TestReportShowsLatencyErrors(t *testing.T) {
	var served atomic.Int64 // every fourth request fails
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1)%4 == 0 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer bad.Close()
	cl := newClient()
	defer cl.CloseIdleConnections()
	tg := target{name: "direct", url: bad.URL, model: "m"}
	res := &results{Env: &envInfo{}, Paths: []string{"direct"}, Latency: make([]latencyResult, 1), LatencyIdle: make([]latencyResult, 1)}
	r, err := latencyRun(context.Background(), cl, tg, 0, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	res.Latency[0].merge(r)
	r, err = latencyRun(context.Background(), cl, tg, 0, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	res.LatencyIdle[0].merge(r)
	if res.Latency[0].Errors != 5 || res.LatencyIdle[0].Errors != 2 || res.Latency[0].Lat.N != 15 {
		t.Fatalf("errors %d + %d, latency samples %d; want 5 + 2, 15", res.Latency[0].Errors, res.LatencyIdle[0].Errors, res.Latency[0].Lat.N)
	}
	if md := res.markdown(); !strings.Contains(md, "| c=1 errors (left out of the latencies) | 7 |") {
		t.Fatalf("the report does not show the 7 failed c=1 requests:\n%s", md)
	}
}
