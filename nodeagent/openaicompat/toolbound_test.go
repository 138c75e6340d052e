package openaicompat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An upstream that keeps streaming tool calls, or argument text for one,
// fails the run at adapter.MaxToolCalls / adapter.MaxToolCallBytes instead
// of growing the node's memory until the answer can no longer be sent.
func TestToolCallsBounded(t *testing.T) {
	arg := strings.Repeat("a", 60<<10)
	for name, delta := range map[string]func(i int) string{
		"many calls": func(i int) string {
			return fmt.Sprintf(`{"tool_calls":[{"id":"call_%d","type":"function","index":%d,"function":{"name":"f","arguments":"{}"}}]}`, i, i)
		},
		"long arguments": func(i int) string {
			if i == 0 {
				return `{"tool_calls":[{"id":"call_0","type":"function","index":0,"function":{"name":"f"}}]}`
			}
			return `{"tool_calls":[{"index":0,"function":{"arguments":"` + arg + `"}}]}`
		},
	} {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			for i := 0; i < 4*adapter.MaxToolCalls && r.Context().Err() == nil; i++ {
				sseWrite(t, w, vllmChunk(delta(i), ""))
			}
			sseWrite(t, w, vllmChunk(`{}`, "tool_calls"))
			sseWrite(t, w, vllmDone)
		})
		_, err := runNativeTools(t, srv.URL)
		ae := asAdapterError(t, err)
		if ae.Code != adapter.CodeUpstream || !errors.Is(err, adapter.ErrAnswerTooLarge) {
			t.Errorf("%s: err = %v, want ToolCallsTooLarge", name, err)
		}
		srv.Close()
	}
}

// A server that sends a whole tool call in one chunk (a non-incremental
// tool parser) may send a chunk of several MiB when the model writes a
// file through a tool: the run reads it whole (up to maxRunEvent).
func TestRunReadsLargeSingleChunk(t *testing.T) {
	arg := strings.Repeat("a", 3<<20)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"tool_calls":[{"id":"call_1","type":"function","index":0,"function":{"name":"write_file","arguments":"{\"content\":\"`+arg+`\"}"}}]}`, ""))
		sseWrite(t, w, vllmChunk(`{}`, "tool_calls"))
		sseWrite(t, w, vllmDone)
	})
	res, err := runNativeTools(t, srv.URL)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.FinishReason != "tool_calls" || len(res.Metadata[adapter.MetaToolCalls]) < len(arg) {
		t.Fatalf("finish %q, tool calls %d bytes", res.FinishReason, len(res.Metadata[adapter.MetaToolCalls]))
	}
}

// runNativeTools runs a chat offering tools, in native tool mode, against
// the vLLM-like server at baseURL.
func runNativeTools(t *testing.T, baseURL string) (*adapter.Result, error) {
	t.Helper()
	cfg := testConfig(baseURL)
	cfg.ToolMode = iop.ToolMode_TOOL_MODE_NATIVE
	in := newTestInstance(t, TypeVLLM, cfg)
	return in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", true)}, &fakeRunSink{})
}
