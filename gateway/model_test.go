package gateway_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/iop-gateway/iop/internal/stack"
)

// One model answers with one `model` value whatever the route: the
// provider's target (what served the request, as the upstream itself names
// it on the tunnel), streamed or not, with tools (run route, text tool
// fallback) or without (tunnel).
func TestOneModelValueOnEveryRoute(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var req map[string]json.RawMessage
		_ = json.Unmarshal(bytesOf(r), &req)
		switch {
		case req["tools"] != nil:
			writeJSON(w, http.StatusBadRequest, vllmToolChoiceError) // forces the text fallback
		case string(req["stream"]) == "true":
			writeSSE(w, contentStream("Hello")...)
		default:
			writeJSON(w, http.StatusOK, vllmChatJSON)
		}
	})
	s := tunnelStack(t, u)
	cl := oaClient(t, s.Edge, "k")
	plain := openai.ChatCompletionRequest{Model: "qwen-7b", Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}}
	withTools := plain
	withTools.Tools = []openai.Tool{weatherTool()}

	seen := map[string]string{}
	for name, req := range map[string]openai.ChatCompletionRequest{"tunnel": plain, "run": withTools} {
		resp, err := cl.CreateChatCompletion(ctxT(t), req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seen[name] = resp.Model
		req.Stream = true
		st, err := cl.CreateChatCompletionStream(ctxT(t), req)
		if err != nil {
			t.Fatalf("%s stream: %v", name, err)
		}
		for {
			c, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s stream: %v", name, err)
			}
			seen[name+" stream"] = c.Model
		}
		st.Close()
	}
	for route, m := range seen {
		if m != target {
			t.Errorf("%s: model %q, want the target %q", route, m, target)
		}
	}
	if len(seen) != 4 {
		t.Errorf("routes seen: %v", seen)
	}
	// The run route served the tools requests, the tunnel the others.
	for _, route := range []string{"tunnel", "run"} {
		stack.WaitFor(t, waitLong, "2 requests served by the "+route+" route", func() bool {
			return metric(t, s.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": route, "code": "200"}) == 2
		})
	}
	waitReleased(t, s.Edge, "vllm-main")
}
