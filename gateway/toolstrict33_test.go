package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/iop-gateway/iop/config"
)

// strictTools are two tools as an Anthropic SDK sends them, the first with
// strict tool use on; their schema meets OpenAI's strict mode, so strict
// is sent as asked.
func strictTools() []anthropic.ToolUnionParam {
	schema := anthropic.ToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}},
		Required: []string{"q"}, ExtraFields: map[string]any{"additionalProperties": false}}
	return []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "lookup", InputSchema: schema, Strict: param.NewOpt(true)}},
		{OfTool: &anthropic.ToolParam{Name: "other", InputSchema: schema}},
	}
}

// A tool's strict: true set through the Anthropic SDK reaches vLLM through
// the tunnel as the tool's function.strict: true, streamed or not; the
// other tool gets no strict member.
func TestMessagesToolStrictReachesTunnel(t *testing.T) {
	u := newUpstream(t, vllmHello("Hi"))
	s := tunnelStack(t, u, func(c *config.Edge) { c.Nodes[0].Providers[0].ToolMode = "native" })
	cl := anClient(t, s.Edge, "")
	for _, stream := range []bool{false, true} {
		sendMessage(t, cl, anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64,
			Messages: []anthropic.MessageParam{userText("Look it up")}, Tools: strictTools()}, stream)
		seen := u.requests()
		var body struct {
			Tools []struct {
				Function map[string]json.RawMessage `json:"function"`
			} `json:"tools"`
		}
		if len(seen) == 0 || json.Unmarshal(seen[len(seen)-1].Body, &body) != nil || len(body.Tools) != 2 {
			t.Fatalf("stream %v: vLLM got %d requests, tools %+v", stream, len(seen), body.Tools)
		}
		if got := string(body.Tools[0].Function["strict"]); got != "true" {
			t.Errorf("stream %v: strict tool's function.strict %q", stream, got)
		}
		if got, ok := body.Tools[1].Function["strict"]; ok {
			t.Errorf("stream %v: the other tool got strict %s", stream, got)
		}
	}
}

// On a run the strict tool is the run's ToolDefinition with Strict, as an
// OpenAI client's function.strict is.
func TestMessagesToolStrictInRunRequest(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	n := startFakeNode(t, e, thinkingOffNode)
	cl := anClient(t, e, "")
	if _, err := cl.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "demo", MaxTokens: 64,
		Messages: []anthropic.MessageParam{userText("Look it up")}, Tools: strictTools()}); err != nil {
		t.Fatal(err)
	}
	tools := n.nextRequest(t).GetRunRequest().GetInput().GetTools()
	if len(tools) != 2 || !tools[0].GetStrict() || tools[1].GetStrict() {
		t.Fatalf("run tools %v", tools)
	}
}

// A strict that is not a boolean is a 400 invalid_request_error in
// Anthropic's envelope naming the field, on /v1/messages (streamed or not)
// and count_tokens, and reaches no provider.
func TestMessagesToolStrictRefused(t *testing.T) {
	u := newUpstream(t, vllmHello("Hi"))
	s := tunnelStack(t, u)
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		for _, stream := range []string{"false", "true"} {
			r := post(t, s.Edge, path, `{"model":"qwen-7b","max_tokens":64,"stream":`+stream+
				`,"tools":[{"name":"a","input_schema":{"type":"object"},"strict":"yes"}],"messages":[{"role":"user","content":"x"}]}`)
			if msg := anthropicErrorMessage(t, r); r.Status != http.StatusBadRequest || msg != "tools.0.strict: expected a boolean" {
				t.Errorf("%s, stream %s: %d %s", path, stream, r.Status, r.Body)
			}
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
}
