package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// A client of the Anthropic surface that stops reading its stream must be
// cut off by limits.write_timeout_sec (write_error) and its lease return,
// as on the OpenAI surface (TestSlowReaderDoesNotStallOthers).
func TestAnthropicStreamWriteTimeout(t *testing.T) {
	big := strings.Repeat("x", 48<<10)
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		for i := 0; i < 4000; i++ {
			if _, err := fmt.Fprint(w, chunk(`{"content":"`+big+`"}`, "null")); err != nil {
				return
			}
			f.Flush()
			select {
			case <-time.After(2 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, chunk(`{"content":""}`, `"stop"`), sseDone)
	})
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", u.baseURL())}, modelOn("qwen-7b", "vllm-main", target))
	cfg.Limits.WriteTimeoutSec = 1
	e, _ := startStack(t, cfg)

	body := `{"model":"qwen-7b","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"A"}]}`
	a, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_ = a.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(a, "POST /v1/messages HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nanthropic-version: 2023-06-01\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	stack.WaitFor(t, waitLong, "the stream to start", func() bool { return inFlight(e, "vllm-main") == 1 })

	// The write timeout is 1 s: well within 12 s the edge must give up.
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if inFlight(e, "vllm-main") == 0 {
			t.Logf("write_error cancellations: %v", cancellations(t, e, "write_error"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("lease still held 12 s after the client stopped reading (write timeout 1 s); write_error cancellations = %v",
		cancellations(t, e, "write_error"))
}
