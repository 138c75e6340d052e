package edgeapp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
)

// An answer whose id Redis refuses to record (out of memory, noeviction)
// is relayed all the same, and the id not shared shows on the edge's own
// /metrics as iop_response_ids_unshared_total{reason="write_failed"}:
// the operator's sign of why another edge sends its follow-up elsewhere
// (vLLM's 404), where before there was only a debug log.
func TestUnsharedResponseIDOnMetrics37q(t *testing.T) {
	rs := testredis.Start(t)
	a, b := newStoringVLLM(t, "a"), newStoringVLLM(t, "b")
	// Redis fills up once the lease is taken and before the answer goes
	// (maxmemory 1 byte, noeviction: testredis's OutOfMemory): the grant
	// went through Redis, the id's write is refused.
	rdb := rs.Client(t)
	var oom sync.Once
	full := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/responses" {
			oom.Do(func() {
				for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
					if err := rdb.ConfigSet(r.Context(), kv[0], kv[1]).Err(); err != nil {
						t.Errorf("CONFIG SET %s: %v", kv[0], err)
					}
				}
			})
		}
		a.serve(w, r)
	}))
	t.Cleanup(full.Close)
	a.Server = full
	e := stack.StartEdge(t, clusterResponsesCfg(rs.Addr, a, b), stack.EdgeOptions{})
	t.Cleanup(func() { _ = rdb.ConfigSet(context.Background(), "maxmemory", "0").Err() }) // before the edge closes
	stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "ta", Getenv: respEnv})
	e.WaitReady(t, "a", 10*time.Second)

	const series = `iop_response_ids_unshared_total{reason="write_failed"} `
	if m := scrape37q(t, e); !strings.Contains(m, series+"0\n") || !strings.Contains(m, `iop_response_ids_unshared_total{reason="queue_full"} 0`+"\n") {
		t.Fatalf("/metrics has not both reasons at 0 from the start:\n%s", grepLines37q(m, "iop_response_ids_unshared_total"))
	}
	status, id, body := askResponses(t, e, "")
	if status != http.StatusOK || !strings.HasPrefix(id, "resp_a") {
		t.Fatalf("the answer: %d %q: %s", status, id, body)
	}
	stack.WaitFor(t, 10*time.Second, "write_failed 1 on /metrics", func() bool {
		return strings.Contains(scrape37q(t, e), series+"1\n")
	})
}

// scrape37q is e's /metrics, read over HTTP.
func scrape37q(t *testing.T, e *stack.Edge) string {
	t.Helper()
	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// grepLines37q is the lines of s that contain sub.
func grepLines37q(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
