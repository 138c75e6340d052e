package gateway_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// Tool calls a vLLM stream sends one after the other reach a Messages
// client live: the second call's content_block_start arrives while the
// upstream is still holding that call's last fragment back, and the
// stream then completes with both calls.
func TestMessagesSequentialToolCallsStreamLive(t *testing.T) {
	release := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w,
			chunk(`{"role":"assistant","content":""}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":"{\"q\":"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"a\"}"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"other","arguments":"{\"q\":"}}]}`, "null"))
		select { // until the client saw the second call start
		case <-release:
		case <-r.Context().Done():
			return
		}
		for _, e := range []string{chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"b\"}"}}]}`, "null"),
			chunk(`{}`, `"tool_calls"`), usageChunk(12, 9), sseDone} {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	})
	s := tunnelStack(t, u, func(c *config.Edge) { c.Nodes[0].Providers[0].ToolMode = "native" })
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.URL+"/v1/messages",
		strings.NewReader(`{"model":"qwen-7b","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Look both up"}],`+
			`"tools":[{"name":"lookup","input_schema":{"type":"object"}},{"name":"other","input_schema":{"type":"object"}}]}`))
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	started := make(chan string, 1)
	go func() {
		var seen strings.Builder
		for {
			ev, err := readEvent(br)
			seen.WriteString(ev)
			if err != nil || (strings.HasPrefix(ev, "event: content_block_start\n") && strings.Contains(ev, `"call_b"`)) {
				started <- seen.String()
				return
			}
		}
	}()
	before := waitFor(t, started, waitLong, "the second call's block to start while the upstream holds its last fragment")
	close(release)
	if !strings.Contains(before, `"call_b"`) || strings.Contains(before, "event: message_stop") {
		t.Fatalf("before the upstream went on:\n%s", before)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), `"partial_json":"\"b\"}"`) || !strings.Contains(string(rest), `"stop_reason":"tool_use"`) ||
		!strings.HasSuffix(string(rest), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("rest of the stream:\n%s", rest)
	}
}
