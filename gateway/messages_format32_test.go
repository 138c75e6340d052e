package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// formatSchema is a structured-output schema as an Anthropic SDK sends it
// (Pydantic titles the root after its type).
var formatSchema = map[string]any{
	"title": "Contact", "type": "object", "additionalProperties": false,
	"properties": map[string]any{"name": map[string]any{"type": "string"}},
	"required":   []any{"name"},
}

// formatWant is the response_format the chat body carries for formatSchema.
const formatWant = `{"type":"json_schema","json_schema":{"name":"Contact","schema":{"additionalProperties":false,"properties":{"name":{"type":"string"}},"required":["name"],"title":"Contact","type":"object"},"strict":true}}`

// formatWantSchema is the schema formatWant carries.
func formatWantSchema(t *testing.T) string {
	t.Helper()
	var want struct {
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal([]byte(formatWant), &want); err != nil {
		t.Fatal(err)
	}
	return string(want.JSONSchema.Schema)
}

// formatParams asks for formatSchema's JSON on model.
func formatParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256, Messages: []anthropic.MessageParam{userText("Who wrote it?")},
		OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: formatSchema}}}
}

// output_config.format set through the Anthropic SDK reaches vLLM through
// the tunnel as OpenAI's response_format, json_schema with the schema's
// title as its name and strict, streamed or not, with thinking on and with
// tools offered that tool_choice forbids; the JSON the model writes comes
// back as the text. With tools the model may call, vLLM gets the tools
// and no format (see TestMessagesFormatWithToolsByProviderKind).
func TestMessagesFormatReachesTunnel(t *testing.T) {
	u := newUpstream(t, vllmHello(`{"name":"Ada"}`))
	s := tunnelStack(t, u, func(c *config.Edge) { c.Nodes[0].Providers[0].ToolMode = "native" })
	cl := anClient(t, s.Edge, "")
	for _, c := range []struct {
		name string
		edit func(*anthropic.MessageNewParams)
	}{
		{"plain", func(*anthropic.MessageNewParams) {}},
		{"tools", func(p *anthropic.MessageNewParams) { p.Tools = []anthropic.ToolUnionParam{formatTool} }},
		{"tools none", func(p *anthropic.MessageNewParams) {
			p.Tools = []anthropic.ToolUnionParam{formatTool}
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
		}},
		{"thinking", func(p *anthropic.MessageNewParams) { p.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024) }},
	} {
		for _, stream := range []bool{false, true} {
			p := formatParams("qwen-7b")
			c.edit(&p)
			msg := sendMessage(t, cl, p, stream)
			if stream && (len(msg.Content) != 1 || msg.Content[0].Text != `{"name":"Ada"}`) {
				t.Errorf("%s, streamed: answer %+v", c.name, msg.Content)
			}
			seen := u.requests()
			var body map[string]json.RawMessage
			if err := json.Unmarshal(seen[len(seen)-1].Body, &body); err != nil {
				t.Fatal(err)
			}
			if c.name == "tools" {
				if rf, ok := body["response_format"]; ok {
					t.Errorf("tools: vLLM got response_format %s", rf)
				}
			} else {
				jsonEqual(t, string(body["response_format"]), formatWant)
			}
			if c.name != "plain" && c.name != "thinking" && body["tools"] == nil {
				t.Errorf("%s: vLLM got no tools", c.name)
			}
		}
	}
}

// On a run the format is the run's ResponseFormat, as an OpenAI client's
// response_format is: JSON schema, named, strict, the schema's bytes.
func TestMessagesFormatInRunRequest(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	n := startFakeNode(t, e, thinkingOffNode)
	cl := anClient(t, e, "")
	if _, err := cl.Messages.New(ctxT(t), formatParams("demo")); err != nil {
		t.Fatal(err)
	}
	rf := n.nextRequest(t).GetRunRequest().GetInput().GetResponseFormat()
	if rf.GetType() != iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA || rf.GetSchemaName() != "Contact" || !rf.GetStrict() {
		t.Fatalf("run response format %v", rf)
	}
	jsonEqual(t, string(rf.GetSchema()), formatWantSchema(t))

	// Without a format the run has none.
	if _, err := cl.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "demo", MaxTokens: 16, Messages: []anthropic.MessageParam{userText("Hi")}}); err != nil {
		t.Fatal(err)
	}
	if rf := n.nextRequest(t).GetRunRequest().GetInput().GetResponseFormat(); rf != nil {
		t.Errorf("a request without a format ran with %v", rf)
	}
}

// End to end with the ollama adapter: the format is Ollama's format, the
// schema itself, streamed or not.
func TestMessagesFormatReachesOllama(t *testing.T) {
	e, u := histOllamaStack(t)
	an := anClient(t, e, "")
	for _, stream := range []bool{false, true} {
		sendMessage(t, an, formatParams("qwen"), stream)
		bodies := histOllamaBodies(u, "/api/chat")
		if len(bodies) == 0 {
			t.Fatal("Ollama got no chat")
		}
		jsonEqual(t, string(bodies[len(bodies)-1]["format"]), formatWantSchema(t))
	}
}

// A format Anthropic's API refuses is a 400 invalid_request_error in
// Anthropic's envelope naming the field, on /v1/messages (streamed or not)
// and count_tokens, and reaches no provider; the deprecated output_format
// is checked alike. A good format is taken by count_tokens too.
func TestMessagesFormatRefused(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u)
	for _, c := range []struct{ member, want string }{
		{`"output_config":{"format":{"type":"json_object"}}`, `output_config.format.type: must be "json_schema"`},
		{`"output_config":{"format":{"schema":{"type":"object"}}}`, "output_config.format.type: Field required"},
		{`"output_config":{"format":{"type":"json_schema"}}`, "output_config.format.schema: Field required"},
		{`"output_config":{"format":{"type":"json_schema","schema":"{}"}}`, "output_config.format.schema: expected an object"},
		{`"output_config":{"format":"json"}`, "output_config.format: expected an object"},
		{`"output_format":{"type":"json_schema","schema":[]}`, "output_format.schema: expected an object"},
	} {
		for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
			for _, stream := range []string{"false", "true"} {
				r := post(t, s.Edge, path, `{"model":"qwen-7b","max_tokens":64,"stream":`+stream+`,`+c.member+
					`,"messages":[{"role":"user","content":"x"}]}`)
				if msg := anthropicErrorMessage(t, r); r.Status != http.StatusBadRequest || msg != c.want {
					t.Errorf("%s %s, stream %s: %d %s, want 400 %q", path, c.member, stream, r.Status, r.Body, c.want)
				}
			}
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
	r := post(t, s.Edge, "/v1/messages/count_tokens", `{"model":"qwen-7b","output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},"messages":[{"role":"user","content":"x"}]}`)
	if r.Status != http.StatusOK {
		t.Errorf("count_tokens with a format: %d %s", r.Status, r.Body)
	}
}
