package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// A client that stops reading its stream must not slow another stream on
// the same node, and is itself cancelled (write_error) once the edge cannot
// write to it for limits.write_timeout_sec, releasing its lease.
func TestSlowReaderDoesNotStallOthers(t *testing.T) {
	const (
		events  = 200
		pace    = 5 * time.Millisecond
		payload = 48 << 10 // per event: A's ~9.6 MB cannot all sit in socket buffers
		maxGap  = 500 * time.Millisecond
	)
	big, small := strings.Repeat("x", payload), strings.Repeat("y", 200)
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		// A's stream is heavy (it must overflow every socket buffer on the
		// way); B's is light, so B measures stalls, not CPU spent copying.
		content := small
		if b, _ := io.ReadAll(r.Body); strings.Contains(string(b), `"content":"A"`) {
			content = big
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for i := 0; i < events; i++ {
			if _, err := fmt.Fprint(w, chunk(`{"content":"`+content+`"}`, "null")); err != nil {
				return
			}
			f.Flush()
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, chunk(`{"content":""}`, `"stop"`), sseDone)
	})
	p := vllmProvider("vllm-main", u.baseURL())
	p.Capacity = 2
	cfg := edgeConfig([]config.ProviderSpec{p}, modelOn("qwen-7b", "vllm-main", target))
	cfg.Limits.WriteTimeoutSec = 1
	e, _ := startStack(t, cfg)
	bodyFor := func(who string) string {
		return `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"` + who + `"}]}`
	}

	// Client A: raw TCP, a tiny receive buffer, never reads a byte.
	a := stalledClient(t, e.URL, "/v1/chat/completions", "", bodyFor("A"))
	defer a.Close()
	stack.WaitFor(t, waitLong, "A's stream to start", func() bool { return inFlight(e, "vllm-main") == 1 })

	// Client B reads everything; its events must keep flowing.
	type result struct {
		n       int
		maxGap  time.Duration
		elapsed time.Duration
		err     error
	}
	done := make(chan result, 1)
	c := httpClient(t)
	ctx := ctxT(t)
	go func() {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(bodyFor("B")))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		var res result
		last := time.Now()
		for {
			ev, err := readEvent(br)
			if ev != "" {
				if gap := time.Since(last); gap > res.maxGap && res.n > 0 {
					res.maxGap = gap
				}
				last = time.Now()
				res.n++
			}
			if err != nil {
				break
			}
		}
		res.elapsed = time.Since(start)
		done <- res
	}()
	res := waitFor(t, done, 60*time.Second, "client B to finish")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.n != events+2 { // 200 content events, the finish chunk, [DONE]
		t.Errorf("B got %d events, want %d", res.n, events+2)
	}
	if res.maxGap > maxGap {
		t.Errorf("B waited %s between two events (limit %s): the stalled client slowed it", res.maxGap, maxGap)
	}
	if res.elapsed > 30*time.Second {
		t.Errorf("B took %s", res.elapsed)
	}
	t.Logf("B: %d events in %s, longest gap %s", res.n, res.elapsed, res.maxGap)

	// A is cut off by the write timeout, not left holding its lease.
	stack.WaitFor(t, 30*time.Second, "A cancelled with write_error", func() bool { return cancellations(t, e, "write_error") == 1 })
	waitReleased(t, e, "vllm-main")
	if got := metric(t, e.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "vllm-main", "reason": "cancelled"}); got != 1 {
		t.Errorf("releases with reason cancelled = %v, want 1 (A)", got)
	}
	if got := metric(t, e.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "vllm-main", "reason": "completed"}); got != 1 {
		t.Errorf("releases with reason completed = %v, want 1 (B)", got)
	}
}
