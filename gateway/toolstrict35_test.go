package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/iop-gateway/iop/config"
)

// toolStrict35Refusal is OpenAI's answer to a strict function whose
// parameters leave a property out of required (the body OpenAI sends,
// as quoted in langchain-ai/langchain#39306, for this tool).
const toolStrict35Refusal = `{"error":{"message":"Invalid schema for function 'lookup': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'limit'.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}`

// toolStrict35Upstream imitates OpenAI's chat completions: a strict
// function whose parameters leave a property out of required, or do not
// close the object, is refused as OpenAI refuses it; anything else is
// answered.
func toolStrict35Upstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Tools []struct {
				Function struct {
					Strict     bool `json:"strict"`
					Parameters struct {
						Properties           map[string]json.RawMessage `json:"properties"`
						Required             []string                   `json:"required"`
						AdditionalProperties *bool                      `json:"additionalProperties"`
					} `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeJSON(w, http.StatusBadRequest, `{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		for _, tl := range body.Tools {
			p := tl.Function.Parameters
			if tl.Function.Strict && (len(p.Required) != len(p.Properties) || p.AdditionalProperties == nil || *p.AdditionalProperties) {
				writeJSON(w, http.StatusBadRequest, toolStrict35Refusal)
				return
			}
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
}

// toolStrict35 is a strict tool whose schema Anthropic takes (closed,
// limit optional) and OpenAI's strict mode refuses; closed with every
// property required, the same tool meets strict mode.
func toolStrict35(required ...string) anthropic.ToolUnionParam {
	schema := anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"q": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer"}},
		Required:   required, ExtraFields: map[string]any{"additionalProperties": false}}
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "lookup", InputSchema: schema, Strict: param.NewOpt(true)}}
}

// A strict Messages tool with an optional property reaches OpenAI
// (openai_compat) and vLLM's tunnel without strict, and is answered
// instead of refused, streamed or not; the tool itself is sent, schema
// unchanged. A strict tool whose schema strict mode takes still goes as
// strict.
func TestMessagesToolStrictOptionalPropertyOnOpenAI(t *testing.T) {
	u := toolStrict35Upstream(t)
	cfg := edgeConfig([]config.ProviderSpec{
		{Name: "oa", Type: "openai_compat", BaseURL: u.baseURL(), APIKeyEnv: keyEnv, Capacity: 4},
		{Name: "vl", Type: "vllm", BaseURL: u.baseURL(), APIKeyEnv: keyEnv, Capacity: 4, ToolMode: "native"}},
		modelOn("gpt", "oa", target), modelOn("qwen", "vl", target))
	e, _ := startStack(t, cfg)
	an := anClient(t, e, "")
	for _, model := range []string{"gpt", "qwen"} {
		for _, stream := range []bool{false, true} {
			for _, c := range []struct {
				required []string
				strict   string // the function's strict member as sent; "" none
			}{{[]string{"q"}, ""}, {[]string{"q", "limit"}, "true"}} {
				msg := sendMessage(t, an, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
					Messages: []anthropic.MessageParam{userText("Look it up")}, Tools: []anthropic.ToolUnionParam{toolStrict35(c.required...)}}, stream)
				if len(msg.Content) != 1 || msg.Content[0].Text != "Hello! How can I help you today?" {
					t.Fatalf("%s, stream %v, required %v: answer %+v", model, stream, c.required, msg.Content)
				}
				chats := thinkoffChats(t, u)
				var tools []struct {
					Function map[string]json.RawMessage `json:"function"`
				}
				if err := json.Unmarshal(chats[len(chats)-1]["tools"], &tools); err != nil || len(tools) != 1 {
					t.Fatalf("%s, stream %v: tools %s", model, stream, chats[len(chats)-1]["tools"])
				}
				if got := string(tools[0].Function["strict"]); got != c.strict {
					t.Errorf("%s, stream %v, required %v: strict %q, want %q", model, stream, c.required, got, c.strict)
				}
				var params struct {
					Required []string `json:"required"`
				}
				if json.Unmarshal(tools[0].Function["parameters"], &params) != nil || len(params.Required) != len(c.required) {
					t.Errorf("%s, stream %v: parameters %s", model, stream, tools[0].Function["parameters"])
				}
			}
		}
	}
}
