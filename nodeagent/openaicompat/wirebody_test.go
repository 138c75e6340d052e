package openaicompat

import (
	"encoding/json"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The OpenAI body each typed RunInput field becomes, member by member, as
// OpenAI's API and vLLM's server read them.
func TestRequestBodyMembers(t *testing.T) {
	cases := []struct {
		name   string
		op     iop.RunOperation
		input  string
		member string
		want   string
	}{
		{"one image part stays a part list", adapter.OpChat,
			`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}]}`,
			"messages", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}]`},
		{"assistant tool calls", adapter.OpChat,
			`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}]}`,
			"messages", `[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}]`},
		{"tool_choice required", adapter.OpChat,
			`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`,
			"tool_choice", `"required"`},
		{"strict tool", adapter.OpChat,
			`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object"}}}]}`,
			"tools", `[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object"}}}]`},
		{"strict json schema", adapter.OpChat,
			`{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object"}}}}`,
			"response_format", `{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object"}}}`},
		{"sampling", adapter.OpChat,
			`{"messages":[{"role":"user","content":"hi"}],"temperature":0.5,"top_p":0.9,"top_k":40,"max_tokens":7,"stop":["x"],"seed":3,"presence_penalty":0.1,"frequency_penalty":0.2}`,
			"", `{"temperature":0.5,"top_p":0.9,"top_k":40,"max_tokens":7,"stop":["x"],"seed":3,"presence_penalty":0.1,"frequency_penalty":0.2}`},
		{"completion suffix", adapter.OpCompletion, `{"prompt":"def f(","suffix":"return x"}`, "suffix", `"return x"`},
		{"embedding dimensions", adapter.OpEmbedding, `{"input":["a"],"dimensions":256}`, "dimensions", `256`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := requestBody(testinput.For(c.op, c.input), c.op, "m", "")
			if err != nil {
				t.Fatalf("requestBody: %v", err)
			}
			if c.member != "" {
				jsonEqual(t, string(body[c.member]), c.want)
				return
			}
			var want map[string]json.RawMessage
			if err := json.Unmarshal([]byte(c.want), &want); err != nil {
				t.Fatal(err)
			}
			for k, v := range want {
				jsonEqual(t, string(body[k]), string(v))
			}
		})
	}
}

// Unset sampling sends nothing: no max_tokens of 0 (which vLLM refuses)
// and no other member the caller did not set.
func TestRequestBodyUnsetSamplingOmitted(t *testing.T) {
	body, err := requestBody(testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`), adapter.OpChat, "m", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"max_tokens", "temperature", "top_p", "top_k", "stop", "seed", "presence_penalty", "frequency_penalty", "response_format", "tool_choice", "tools", "parallel_tool_calls"} {
		if v, ok := body[k]; ok {
			t.Errorf("%s = %s, want it absent", k, v)
		}
	}
}

// Inputs the edge never builds are refused or cleaned, never a panic on
// the node: extra that is JSON null, tool parameters or a schema that are
// not JSON (dropped, as no parameters).
func TestRequestBodyMalformedInput(t *testing.T) {
	if _, err := requestBody(&iop.RunInput{Extra: []byte("null"), Messages: []*iop.ChatMessage{}}, adapter.OpChat, "m", ""); err == nil {
		t.Fatal("extra null accepted")
	} else if ae := asAdapterError(t, err); ae.Code != adapter.CodeInvalidRequest {
		t.Fatalf("extra null: %v", err)
	}
	in := &iop.RunInput{
		Tools: []*iop.ToolDefinition{{Name: "f", Parameters: []byte(`{"type":`)}},
		ResponseFormat: &iop.ResponseFormat{Type: iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
			SchemaName: "n", Schema: []byte(`{bad`)},
	}
	body, err := requestBody(in, adapter.OpChat, "m", "")
	if err != nil {
		t.Fatalf("requestBody: %v", err)
	}
	jsonEqual(t, string(body["tools"]), `[{"type":"function","function":{"name":"f"}}]`)
	jsonEqual(t, string(body["response_format"]), `{"type":"json_schema","json_schema":{"name":"n"}}`)
}
