package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// thinkingOffNode answers every run with "Hi" and records its request.
func thinkingOffNode(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
	rr := first.GetRunRequest()
	if rr == nil {
		return
	}
	n.record(first)
	seq := uint64(0)
	for _, ev := range []*iop.RunEvent{
		{Type: iop.RunEventType_RUN_EVENT_TYPE_START},
		{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "Hi"},
		{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop", Usage: &iop.Usage{PromptTokens: 3, CompletionTokens: 1}},
	} {
		seq++
		ev.RunId, ev.Sequence = rr.GetRunId(), seq
		if st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}) != nil {
			return
		}
	}
	_ = st.CloseWrite()
	<-ctx.Done()
}

// thinkingOffExtra is the run request's extra members, decoded.
func thinkingOffExtra(t *testing.T, env *iop.Envelope) map[string]json.RawMessage {
	t.Helper()
	rr := env.GetRunRequest()
	if rr == nil {
		t.Fatalf("the node got %v, want a run", env)
	}
	extra := map[string]json.RawMessage{}
	if raw := rr.GetInput().GetExtra(); len(raw) > 0 {
		if err := json.Unmarshal(raw, &extra); err != nil {
			t.Fatalf("extra %s: %v", raw, err)
		}
	}
	return extra
}

// thinking {"type":"disabled"} on /v1/messages reaches a run on a provider
// that is not OpenAI-compatible as reasoning_effort "none" among the run's
// extra members (the ollama adapter's think: false), beside the members
// the conversion puts there; enabled or absent thinking adds nothing (an
// unknown type is refused, thinktype_test.go). A run on an
// OpenAI-compatible provider (a request with tools on tool_mode auto) gets
// no reasoning_effort: its adapter passes extra members upstream as they
// are, and strict servers refuse the member (a vLLM one gets
// chat_template_kwargs instead, thinkoff_template_test.go).
func TestThinkingOffInRunRequest(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	n := startFakeNode(t, e, thinkingOffNode)
	const tools = `"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],`
	for _, c := range []struct {
		model, tools, thinking, want string
	}{
		{"demo", "", `{"type":"disabled"}`, `"none"`},
		{"demo", tools, `{"type":"disabled","budget_tokens":2048}`, `"none"`},
		{"demo", "", `{"type":"enabled","budget_tokens":2048}`, ``},
		{"demo", "", `{"type":"adaptive"}`, ``},
		{"demo", "", ``, ``},
		{"qwen-7b", tools, `{"type":"disabled"}`, ``},
	} {
		thinking := ""
		if c.thinking != "" {
			thinking = `,"thinking":` + c.thinking
		}
		body := `{"model":"` + c.model + `","max_tokens":4096,"stream":true,"metadata":{"user_id":"u-1"},` + c.tools +
			`"messages":[{"role":"user","content":"Hi"}]` + thinking + `}`
		r := post(t, e, "/v1/messages", body)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "event: message_stop") {
			t.Fatalf("%s: %d %s", body, r.Status, r.Body)
		}
		extra := thinkingOffExtra(t, n.nextRequest(t))
		if got := string(extra["reasoning_effort"]); got != c.want {
			t.Errorf("%s: reasoning_effort %q, want %q", body, got, c.want)
		}
		if string(extra["user"]) != `"u-1"` || string(extra["stream_options"]) != `{"include_usage":true}` {
			t.Errorf("%s: extra members %v", body, extra)
		}
	}
}

// End to end with the ollama adapter: thinking off on /v1/messages is
// think: false on Ollama's /api/chat (it stops the model thinking); thinking
// enabled, or not given, leaves think out (the model's default), as before.
func TestThinkingOffReachesOllama(t *testing.T) {
	e, u := histOllamaStack(t)
	an := anClient(t, e, "")
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	off := anthropic.NewThinkingConfigDisabledParam()
	for _, c := range []struct {
		name     string
		thinking anthropic.ThinkingConfigParamUnion
		want     string
	}{
		{"disabled", anthropic.ThinkingConfigParamUnion{OfDisabled: &off}, `false`},
		{"enabled", anthropic.ThinkingConfigParamOfEnabled(1024), ``},
		{"absent", anthropic.ThinkingConfigParamUnion{}, ``},
	} {
		p := anthropic.MessageNewParams{Model: "qwen", MaxTokens: 2048, Tools: []anthropic.ToolUnionParam{tool},
			Thinking: c.thinking, Messages: []anthropic.MessageParam{userText("Weather in Paris?")}}
		for _, stream := range []bool{false, true} {
			msg := sendMessage(t, an, p, stream)
			if n := len(msg.Content); n == 0 || msg.Content[n-1].Type != "tool_use" {
				t.Errorf("%s, stream %v: answer %+v", c.name, stream, msg.Content)
			}
			bodies := histOllamaBodies(u, "/api/chat")
			if got := string(bodies[len(bodies)-1]["think"]); got != c.want {
				t.Errorf("%s, stream %v: Ollama got think %q, want %q", c.name, stream, got, c.want)
			}
		}
	}
}
