package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/iop-gateway/iop/internal/testinput"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func runChat(t *testing.T, inst *Instance, input string) (*adapter.Result, []string, error) {
	t.Helper()
	sink := newSink()
	res, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(input),
	}, sink)
	return res, sink.got(), err
}

const simpleChat = `{"messages":[{"role":"user","content":"why is the sky blue?"}]}`

func TestChatStreamsDeltasAndUsage(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineThe, chatLineSky, chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	res, deltas, err := runChat(t, inst, simpleChat)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !slices.Equal(deltas, []string{"The", " sky"}) {
		t.Fatalf("deltas = %q", deltas)
	}
	if res.FinishReason != "stop" || res.Metadata != nil {
		t.Fatalf("finish = %q, metadata = %v", res.FinishReason, res.Metadata)
	}
	if u := res.Usage; u == nil || u.PromptTokens != 26 || u.CompletionTokens != 282 || u.TotalTokens != 308 {
		t.Fatalf("usage = %v", res.Usage)
	}

	req := f.request(t)
	if req.method != http.MethodPost || req.path != "/api/chat" {
		t.Fatalf("request %s %s", req.method, req.path)
	}
	if ct := req.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content-type %q", ct)
	}
	body := decodeBody(t, req.body)
	wantJSON(t, "body", body, `{"model":"llama3.2","stream":true,
		"messages":[{"role":"user","content":"why is the sky blue?"}]}`)
}

func TestChatToolCalls(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	res, deltas, err := runChat(t, inst, `{"messages":[{"role":"user","content":"What is the weather today in Toronto?"}],
		"tools":[{"type":"function","function":{"name":"get_current_weather","description":"Get the current weather for a location",
		"parameters":{"type":"object","properties":{"location":{"type":"string"},"format":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location","format"]}}}]}`)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(deltas) != 0 {
		t.Fatalf("empty content produced deltas %q", deltas)
	}
	if res.FinishReason != "tool_calls" {
		t.Fatalf("finish = %q", res.FinishReason)
	}
	if u := res.Usage; u.PromptTokens != 122 || u.CompletionTokens != 33 || u.TotalTokens != 155 {
		t.Fatalf("usage = %v", u)
	}
	calls := decodeCalls(t, res)
	if len(calls) != 1 {
		t.Fatalf("calls = %+v", calls)
	}
	c := calls[0]
	if !strings.HasPrefix(c.ID, "call_") || len(c.ID) <= len("call_") || c.Type != "function" || c.Function.Name != "get_current_weather" {
		t.Fatalf("call = %+v", c)
	}
	// Arguments are a JSON string that decodes to Ollama's object.
	var args map[string]string
	if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
		t.Fatalf("arguments %q are not a JSON object string: %v", c.Function.Arguments, err)
	}
	if args["format"] != "celsius" || args["location"] != "Toronto" {
		t.Fatalf("args = %v", args)
	}
	body := decodeBody(t, f.request(t).body)
	tools, _ := body["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools not forwarded: %v", body["tools"])
	}
}

func TestChatToolCallIDs(t *testing.T) {
	// Newer Ollama versions send an id and an index; a duplicate or missing
	// id gets a fresh one so every call stays addressable.
	two := `{"model":"qwen3","created_at":"2025-09-01T10:00:00.000000Z","message":{"role":"assistant","content":"Checking.","tool_calls":[` +
		`{"id":"call_k3x9","function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}},` +
		`{"id":"call_k3x9","function":{"index":1,"name":"get_weather","arguments":{}}}]},"done":false}`
	three := `{"model":"qwen3","created_at":"2025-09-01T10:00:00.100000Z","message":{"role":"assistant","content":"","tool_calls":[` +
		`{"function":{"name":"get_time","arguments":{"tz":"CET","n":[1,2]}}}]},"done":false}`
	f := newFake(t)
	f.handle("/api/chat", ndjson(two, three, chatLineToolDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	res, deltas, err := runChat(t, inst, simpleChat)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !slices.Equal(deltas, []string{"Checking."}) {
		t.Fatalf("deltas = %q", deltas)
	}
	calls := decodeCalls(t, res)
	if len(calls) != 3 {
		t.Fatalf("calls = %+v", calls)
	}
	if calls[0].ID != "call_k3x9" {
		t.Fatalf("upstream id not kept: %q", calls[0].ID)
	}
	ids := map[string]bool{}
	for _, c := range calls {
		ids[c.ID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("ids not unique: %+v", calls)
	}
	if calls[1].Function.Arguments != "{}" || calls[2].Function.Arguments != `{"tz":"CET","n":[1,2]}` {
		t.Fatalf("arguments = %q, %q", calls[1].Function.Arguments, calls[2].Function.Arguments)
	}
}

func TestChatRequestMapping(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, Settings: map[string]string{
		SettingOptions:   `{"num_ctx":8192,"temperature":0.7}`,
		SettingKeepAlive: "10m",
	}})
	input := `{
		"messages":[
			{"role":"developer","content":"Be terse."},
			{"role":"user","content":[{"type":"text","text":"What is in"},{"type":"text","text":"this image?"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
			{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\": \"cat\"}"}},
				{"id":"call_2","type":"function","function":{"name":"noargs","arguments":""}}]},
			{"role":"tool","tool_call_id":"call_1","content":"a cat"},
			{"role":"tool","tool_call_id":"call_2","name":"explicit","content":[{"type":"text","text":"done"}]}
		],
		"temperature":0.2,"top_p":0.9,"seed":7,"stop":"END",
		"max_tokens":10,"max_completion_tokens":64,
		"presence_penalty":0.5,"frequency_penalty":0.25,
		"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],
		"response_format":{"type":"json_object"},
		"stream":true,"stream_options":{"include_usage":true},"n":1,"user":"u1"
	}`
	if _, _, err := runChat(t, inst, input); err != nil {
		t.Fatalf("Run: %v", err)
	}
	body := decodeBody(t, f.request(t).body)
	wantJSON(t, "messages", body["messages"], `[
		{"role":"system","content":"Be terse."},
		{"role":"user","content":"What is in\nthis image?","images":["iVBORw0KGgo="]},
		{"role":"assistant","content":"","tool_calls":[
			{"id":"call_1","function":{"name":"lookup","arguments":{"q":"cat"}}},
			{"id":"call_2","function":{"name":"noargs","arguments":{}}}]},
		{"role":"tool","content":"a cat","tool_name":"lookup","tool_call_id":"call_1"},
		{"role":"tool","content":"done","tool_name":"explicit","tool_call_id":"call_2"}]`)
	wantJSON(t, "options", body["options"], `{"num_ctx":8192,"temperature":0.2,"top_p":0.9,"seed":7,
		"stop":["END"],"num_predict":64,"presence_penalty":0.5,"frequency_penalty":0.25}`)
	wantJSON(t, "tools", body["tools"], `[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`)
	wantJSON(t, "format", body["format"], `"json"`)
	wantJSON(t, "keep_alive", body["keep_alive"], `"10m"`)
	if body["stream"] != true || body["model"] != "llama3.2" {
		t.Fatalf("stream/model = %v/%v", body["stream"], body["model"])
	}
	for _, k := range []string{"n", "user", "stream_options", "max_tokens", "response_format", "tool_choice"} {
		if _, ok := body[k]; ok {
			t.Errorf("OpenAI-only field %q leaked into the Ollama request", k)
		}
	}
}

func TestChatRequestMappingVariants(t *testing.T) {
	cases := []struct {
		name, input, field, want string
	}{
		{"stop array", `{"messages":[],"stop":["a","b"]}`, "options", `{"stop":["a","b"]}`},
		{"max_tokens only", `{"messages":[],"max_tokens":5}`, "options", `{"num_predict":5}`},
		{"json schema", `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"age":{"type":"integer"}}}}}}`,
			"format", `{"type":"object","properties":{"age":{"type":"integer"}}}`},
		{"text format", `{"messages":[],"response_format":{"type":"text"}}`, "format", `null`},
		{"tool_choice none drops tools", `{"messages":[],"tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}]}`, "tools", `null`},
		{"tool_choice auto keeps tools", `{"messages":[],"tool_choice":"auto","tools":[{"type":"function","function":{"name":"f"}}]}`, "tools", `[{"type":"function","function":{"name":"f"}}]`},
		{"no options", `{"messages":[]}`, "options", `null`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/chat", ndjson(chatLineFinal))
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			if _, _, err := runChat(t, inst, c.input); err != nil {
				t.Fatalf("Run: %v", err)
			}
			wantJSON(t, c.field, decodeBody(t, f.request(t).body)[c.field], c.want)
		})
	}
}

func TestChatBadInput(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	for _, in := range []string{
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"not json"}}]}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1]"}}]}]}`,
	} {
		_, _, err := runChat(t, inst, in)
		var ae *adapter.Error
		if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest {
			t.Errorf("input %s: err = %v, want invalid_request", in, err)
		}
	}
	// Nothing invalid reached Ollama.
	select {
	case r := <-f.reqs:
		t.Fatalf("invalid input was sent upstream: %s", r.body)
	default:
	}
	// An empty target is rejected before any request too.
	_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Input: testinput.Chat(simpleChat)}, newSink())
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest {
		t.Fatalf("empty target: err = %v", err)
	}
}

func decodeCalls(t *testing.T, res *adapter.Result) []openAIToolCallOut {
	t.Helper()
	raw, ok := res.Metadata[adapter.MetaToolCalls]
	if !ok {
		t.Fatalf("no %s metadata: %v", adapter.MetaToolCalls, res.Metadata)
	}
	var calls []openAIToolCallOut
	if err := json.Unmarshal([]byte(raw), &calls); err != nil {
		t.Fatalf("tool calls %q: %v", raw, err)
	}
	return calls
}
