package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// strict34Refusal is OpenAI's answer to a strict response_format whose
// object leaves a property out of required.
const strict34Refusal = `{"error":{"message":"Invalid schema for response_format 'Contact': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'email'.","type":"invalid_request_error","param":"response_format","code":null}}`

// strict34Upstream imitates OpenAI's chat completions: a strict
// json_schema whose root leaves a property out of required is refused as
// OpenAI refuses it; anything else is answered.
func strict34Upstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ResponseFormat *struct {
				JSONSchema struct {
					Strict bool `json:"strict"`
					Schema struct {
						Properties map[string]json.RawMessage `json:"properties"`
						Required   []string                   `json:"required"`
					} `json:"schema"`
				} `json:"json_schema"`
			} `json:"response_format"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeJSON(w, http.StatusBadRequest, `{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		if rf := body.ResponseFormat; rf != nil && rf.JSONSchema.Strict && len(rf.JSONSchema.Schema.Required) != len(rf.JSONSchema.Schema.Properties) {
			writeJSON(w, http.StatusBadRequest, strict34Refusal)
			return
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
}

// strict34Optional is a schema Anthropic's structured outputs take (every
// object closed, email optional) and OpenAI's strict mode refuses.
var strict34Optional = map[string]any{
	"title": "Contact", "type": "object", "additionalProperties": false,
	"properties": map[string]any{"name": map[string]any{"type": "string"}, "email": map[string]any{"type": "string"}},
	"required":   []any{"name"},
}

// A Messages format with an optional property reaches OpenAI
// (openai_compat) without strict, and is answered instead of refused, on
// a tunnel (no tools) and a run (tools), streamed or not; a schema strict
// mode takes still goes as strict.
func TestMessagesFormatOptionalPropertyOnOpenAI(t *testing.T) {
	u := strict34Upstream(t)
	cfg := edgeConfig([]config.ProviderSpec{{Name: "oa", Type: "openai_compat", BaseURL: u.baseURL(), APIKeyEnv: keyEnv, Capacity: 4}},
		modelOn("gpt", "oa", target))
	e, _ := startStack(t, cfg)
	an := anClient(t, e, "")
	for _, tools := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			p := formatParams("gpt")
			p.OutputConfig.Format.Schema = strict34Optional
			if tools {
				p.Tools = []anthropic.ToolUnionParam{formatTool}
			}
			msg := sendMessage(t, an, p, stream)
			if len(msg.Content) != 1 || msg.Content[0].Text != "Hello! How can I help you today?" {
				t.Fatalf("tools %v, stream %v: answer %+v", tools, stream, msg.Content)
			}
			chats := thinkoffChats(t, u)
			rf := string(chats[len(chats)-1]["response_format"])
			jsonEqual(t, rf, `{"type":"json_schema","json_schema":{"name":"Contact","schema":`+
				`{"additionalProperties":false,"properties":{"email":{"type":"string"},"name":{"type":"string"}},"required":["name"],"title":"Contact","type":"object"}}}`)

			sendMessage(t, an, formatParams("gpt"), stream)
			chats = thinkoffChats(t, u)
			jsonEqual(t, string(chats[len(chats)-1]["response_format"]), formatWant)
		}
	}
}
