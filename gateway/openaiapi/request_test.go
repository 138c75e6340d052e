package openaiapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// wantErr asserts err is an *Error 400 invalid_request with the given param
// ("" for a null param) and a message containing msgPart.
func wantErr(t *testing.T, err error, param, msgPart string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *Error", err, err)
	}
	if e.Status != http.StatusBadRequest || e.Code != CodeInvalidRequest || e.Type != TypeInvalidRequest {
		t.Fatalf("got %d %s %s, want 400 invalid_request invalid_request_error", e.Status, e.Code, e.Type)
	}
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("errors.Is(err, ErrInvalidRequest) = false")
	}
	got := ""
	if e.Param != nil {
		got = *e.Param
	}
	if got != param {
		t.Fatalf("param = %q, want %q (message %q)", got, param, e.Message)
	}
	if !strings.Contains(e.Message, msgPart) {
		t.Fatalf("message %q does not contain %q", e.Message, msgPart)
	}
}

const okMsgs = `"messages":[{"role":"user","content":"hi"}]`

func TestParseChatErrors(t *testing.T) {
	many := `{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"x"},`, MaxMessages) + `{"role":"user","content":"x"}]}`
	cases := []struct {
		name, body, param, msg string
	}{
		{"empty body", ``, "", "empty"},
		{"blank body", " \n ", "", "empty"},
		{"malformed", `{"model":"m",`, "", "not valid JSON"},
		{"trailing garbage", `{"model":"m"} x`, "", "not valid JSON"},
		{"invalid utf8", "{\"model\":\"m\xff\"," + okMsgs + "}", "", "UTF-8"},
		{"array body", `[1,2]`, "", "must be a JSON object, but got an array"},
		{"string body", `"x"`, "", "a string"},
		{"missing model", `{` + okMsgs + `}`, "model", "Missing required parameter"},
		{"null model", `{"model":null,` + okMsgs + `}`, "model", "Missing required parameter"},
		{"empty model", `{"model":"",` + okMsgs + `}`, "model", "non-empty"},
		{"blank model", `{"model":"  ",` + okMsgs + `}`, "model", "non-empty"},
		{"numeric model", `{"model":3,` + okMsgs + `}`, "model", "expected a string, but got an integer"},
		{"missing messages", `{"model":"m"}`, "messages", "Missing required parameter"},
		{"messages object", `{"model":"m","messages":{}}`, "messages", "expected an array, but got an object"},
		{"messages string", `{"model":"m","messages":"hi"}`, "messages", "expected an array"},
		{"messages empty", `{"model":"m","messages":[]}`, "messages", "at least one"},
		{"too many messages", many, "messages", "at most 10000"},
		{"message not object", `{"model":"m","messages":["hi"]}`, "messages[0]", "expected an object"},
		{"missing role", `{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role", "Missing"},
		{"role number", `{"model":"m","messages":[{"role":1,"content":"hi"}]}`, "messages[0].role", "expected a string"},
		{"bad role", `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"robot","content":"hi"}]}`, "messages[1].role", "'robot'"},
		{"function role", `{"model":"m","messages":[{"role":"function","content":"hi"}]}`, "messages[0].role", "'function'"},
		{"missing user content", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "Missing"},
		{"null system content", `{"model":"m","messages":[{"role":"system","content":null}]}`, "messages[0].content", "Missing"},
		{"content number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", "expected a string or an array of content parts, but got an integer"},
		{"content object", `{"model":"m","messages":[{"role":"user","content":{"text":"x"}}]}`, "messages[0].content", "but got an object"},
		{"content empty array", `{"model":"m","messages":[{"role":"user","content":[]}]}`, "messages[0].content", "empty array"},
		{"part not object", `{"model":"m","messages":[{"role":"user","content":["x"]}]}`, "messages[0].content[0]", "expected an object"},
		{"part no type", `{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0].type", "Missing"},
		{"part text missing", `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "Missing"},
		{"part text number", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages[0].content[0].text", "expected a string"},
		{"name number", `{"model":"m","messages":[{"role":"user","content":"x","name":1}]}`, "messages[0].name", "expected a string"},
		{"tool_call_id number", `{"model":"m","messages":[{"role":"tool","content":"x","tool_call_id":1}]}`, "messages[0].tool_call_id", "expected a string"},
		{"assistant tool_calls object", `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, "messages[0].tool_calls", "expected an array"},
		{"assistant tool_call string", `{"model":"m","messages":[{"role":"assistant","tool_calls":["x"]}]}`, "messages[0].tool_calls[0]", "expected an object"},
		{"stream string", `{"model":"m",` + okMsgs + `,"stream":"true"}`, "stream", "expected a boolean, but got a string"},
		{"stream number", `{"model":"m",` + okMsgs + `,"stream":1}`, "stream", "expected a boolean"},
		{"stream_options string", `{"model":"m",` + okMsgs + `,"stream":true,"stream_options":"x"}`, "stream_options", "expected an object"},
		{"include_usage string", `{"model":"m",` + okMsgs + `,"stream":true,"stream_options":{"include_usage":"yes"}}`, "stream_options.include_usage", "expected a boolean"},
		{"max_tokens negative", `{"model":"m",` + okMsgs + `,"max_tokens":-1}`, "max_tokens", "between 1 and 1000000"},
		{"max_tokens zero", `{"model":"m",` + okMsgs + `,"max_tokens":0}`, "max_tokens", "between 1"},
		{"max_tokens absurd", `{"model":"m",` + okMsgs + `,"max_tokens":1000001}`, "max_tokens", "between 1 and 1000000"},
		{"max_tokens huge", `{"model":"m",` + okMsgs + `,"max_tokens":1e300}`, "max_tokens", "between"},
		{"max_tokens overflow", `{"model":"m",` + okMsgs + `,"max_tokens":99999999999999999999999}`, "max_tokens", "between"},
		{"max_tokens fraction", `{"model":"m",` + okMsgs + `,"max_tokens":10.5}`, "max_tokens", "expected an integer, but got a number"},
		{"max_tokens string", `{"model":"m",` + okMsgs + `,"max_tokens":"10"}`, "max_tokens", "expected an integer, but got a string"},
		{"max_completion_tokens negative", `{"model":"m",` + okMsgs + `,"max_completion_tokens":-5}`, "max_completion_tokens", "between"},
		{"max_completion_tokens bool", `{"model":"m",` + okMsgs + `,"max_completion_tokens":true}`, "max_completion_tokens", "expected an integer"},
		{"n zero", `{"model":"m",` + okMsgs + `,"n":0}`, "n", "between 1 and 128"},
		{"n string", `{"model":"m",` + okMsgs + `,"n":"2"}`, "n", "expected an integer"},
		{"temperature string", `{"model":"m",` + okMsgs + `,"temperature":"hot"}`, "temperature", "expected a number"},
		{"top_p bool", `{"model":"m",` + okMsgs + `,"top_p":true}`, "top_p", "expected a number"},
		{"stop number", `{"model":"m",` + okMsgs + `,"stop":1}`, "stop", "a string or an array of strings"},
		{"stop array number", `{"model":"m",` + okMsgs + `,"stop":["a",1]}`, "stop[1]", "expected a string"},
		{"user number", `{"model":"m",` + okMsgs + `,"user":1}`, "user", "expected a string"},
		{"response_format string", `{"model":"m",` + okMsgs + `,"response_format":"json"}`, "response_format", "expected an object"},
		{"logprobs string", `{"model":"m",` + okMsgs + `,"logprobs":"yes"}`, "logprobs", "expected a boolean"},
		{"tools object", `{"model":"m",` + okMsgs + `,"tools":{}}`, "tools", "expected an array"},
		{"tool string", `{"model":"m",` + okMsgs + `,"tools":["f"]}`, "tools[0]", "expected an object"},
		{"tool no function", `{"model":"m",` + okMsgs + `,"tools":[{"type":"function"}]}`, "tools[0].function", "Missing"},
		{"tool function string", `{"model":"m",` + okMsgs + `,"tools":[{"type":"function","function":"f"}]}`, "tools[0].function", "expected an object"},
		{"tool no name", `{"model":"m",` + okMsgs + `,"tools":[{"type":"function","function":{"parameters":{}}}]}`, "tools[0].function.name", "Missing"},
		{"tool empty name", `{"model":"m",` + okMsgs + `,"tools":[{"type":"function","function":{"name":""}}]}`, "tools[0].function.name", "non-empty"},
		{"tool name number", `{"model":"m",` + okMsgs + `,"tools":[{"type":"function","function":{"name":7}}]}`, "tools[0].function.name", "expected a string"},
		{"tool type number", `{"model":"m",` + okMsgs + `,"tools":[{"type":1,"function":{"name":"f"}}]}`, "tools[0].type", "expected a string"},
		{"tool parameters string", `{"model":"m",` + okMsgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, "tools[0].function.parameters", "expected an object"},
		{"tool_choice number", `{"model":"m",` + okMsgs + `,"tool_choice":1}`, "tool_choice", "a string or an object"},
		{"tool_choice bad string", `{"model":"m",` + okMsgs + `,"tool_choice":"always"}`, "tool_choice", "'always'"},
		{"tool_choice no type", `{"model":"m",` + okMsgs + `,"tool_choice":{}}`, "tool_choice.type", "Missing"},
		{"tool_choice no function", `{"model":"m",` + okMsgs + `,"tool_choice":{"type":"function"}}`, "tool_choice.function", "Missing"},
		{"tool_choice no name", `{"model":"m",` + okMsgs + `,"tool_choice":{"type":"function","function":{}}}`, "tool_choice.function.name", "Missing"},
		{"tool_choice names no offered tool", `{"model":"m",` + okMsgs + `,"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"c"}}}`, "tool_choice", "not among tools"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseChat([]byte(tc.body))
			if r != nil {
				t.Fatalf("request = %+v, want nil", r)
			}
			wantErr(t, err, tc.param, tc.msg)
		})
	}
}

func TestParseChatOK(t *testing.T) {
	body := `{
  "model": "qwen-7b",
  "messages": [
    {"role": "system", "content": "be brief"},
    {"role": "developer", "content": [{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": "data:,"}}]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "user", "content": "héllo", "name": "bob"}
  ],
  "stream": true,
  "stream_options": {"include_usage": true},
  "max_tokens": 100,
  "max_completion_tokens": 1e3,
  "n": 1,
  "temperature": 0.2,
  "stop": ["a", "b"],
  "tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_weather"}},
    {"function": {"name": "lookup"}},
    {"type": "custom", "custom": {"name": "grammar"}}
  ],
  "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
  "x_vendor_extension": {"anything": [1, 2, 3]}
}`
	r, err := ParseChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "qwen-7b" || !r.Stream || !r.IncludeUsage || !r.HasTools || r.N != 1 || r.MaxTokens != 1000 {
		t.Fatalf("request = %+v", r)
	}
	if strings.Join(r.ToolNames, ",") != "get_weather,lookup" {
		t.Fatalf("tool names = %v", r.ToolNames)
	}
	if r.MessageCount != 5 || string(r.Raw) != body {
		t.Fatalf("count %d / raw not preserved", r.MessageCount)
	}
	if r.RunSupported() != nil {
		t.Fatal("n=1 must be runnable")
	}
	opts := r.RenderOptions()
	// tool_choice names get_weather: only its text calls are restored.
	if opts.Model != "qwen-7b" || !opts.IncludeUsage || strings.Join(opts.ToolNames, ",") != "get_weather" || opts.PromptTokens != r.EstimatePromptTokens() {
		t.Fatalf("render options = %+v", opts)
	}
}

func TestParseChatDefaults(t *testing.T) {
	r, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"assistant"}],"stream_options":{"include_usage":true},"tool_choice":"none","tools":null,"stream":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stream || r.IncludeUsage || r.HasTools || r.ToolNames != nil || r.N != 1 || r.MaxTokens != 0 {
		t.Fatalf("request = %+v", r)
	}
}

func TestChatRunSupported(t *testing.T) {
	r, err := ParseChat([]byte(`{"model":"m",` + okMsgs + `,"n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 3 {
		t.Fatalf("n = %d", r.N)
	}
	wantErr(t, r.RunSupported(), "n", "n > 1")
}

func TestEstimateTokens(t *testing.T) {
	cases := []struct{ bytes, msgs, want int }{
		{0, 0, 0}, {1, 0, 1}, {4, 0, 1}, {5, 0, 2}, {8, 2, 10}, {-3, -1, 0},
	}
	for _, c := range cases {
		if got := EstimateTokens(c.bytes, c.msgs); got != c.want {
			t.Errorf("EstimateTokens(%d,%d) = %d, want %d", c.bytes, c.msgs, got, c.want)
		}
	}
	// "héllo" is 6 bytes; 2 messages; one image part counts nonTextPartBytes.
	r, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"héllo"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:AAAA"}},{"type":"text","text":"ab"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := EstimateTokens(6+nonTextPartBytes+2, 2); r.EstimatePromptTokens() != want || r.PromptBytes != 6+nonTextPartBytes+2 {
		t.Fatalf("estimate = %d (bytes %d), want %d", r.EstimatePromptTokens(), r.PromptBytes, want)
	}
	// Tool schemas count.
	tools := `[{"type":"function","function":{"name":"f"}}]`
	r2, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"héllo"}],"tools":` + tools + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if r2.PromptBytes != 6+len(tools)-2 {
		t.Fatalf("prompt bytes = %d, want %d", r2.PromptBytes, 6+len(tools)-2)
	}
}

func TestParseCompletion(t *testing.T) {
	cases := []struct{ name, body, param, msg string }{
		{"missing prompt", `{"model":"m"}`, "prompt", "Missing"},
		{"prompt number", `{"model":"m","prompt":1}`, "prompt", "expected a string, an array of strings"},
		{"prompt empty array", `{"model":"m","prompt":[]}`, "prompt", "non-empty"},
		{"prompt mixed", `{"model":"m","prompt":["a",{}]}`, "prompt[1]", "a string or an array of integers"},
		{"prompt floats", `{"model":"m","prompt":[1.5]}`, "prompt[0]", "a string or an array of integers"},
		{"max_tokens negative", `{"model":"m","prompt":"x","max_tokens":-1}`, "max_tokens", "between 0"},
		{"stream string", `{"model":"m","prompt":"x","stream":"no"}`, "stream", "expected a boolean"},
		{"echo string", `{"model":"m","prompt":"x","echo":"no"}`, "echo", "expected a boolean"},
		{"no model", `{"prompt":"x"}`, "model", "Missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCompletion([]byte(tc.body))
			wantErr(t, err, tc.param, tc.msg)
		})
	}
	ok := []struct {
		body  string
		count int
		bytes int
	}{
		{`{"model":"m","prompt":"abcd","stream":true,"stream_options":{"include_usage":true},"max_tokens":0}`, 1, 4},
		{`{"model":"m","prompt":["ab","cd"]}`, 2, 4},
		{`{"model":"m","prompt":[1,2,3]}`, 1, 12},
		{`{"model":"m","prompt":[[1,2],[3]]}`, 2, 12},
	}
	for _, c := range ok {
		r, err := ParseCompletion([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if r.PromptCount != c.count || r.PromptBytes != c.bytes {
			t.Fatalf("%s: count %d bytes %d", c.body, r.PromptCount, r.PromptBytes)
		}
	}
	r, _ := ParseCompletion([]byte(ok[0].body))
	if !r.Stream || !r.IncludeUsage || r.RunSupported() != nil || r.RenderOptions().PromptTokens != 1 {
		t.Fatalf("request = %+v", r)
	}
	r, _ = ParseCompletion([]byte(ok[1].body))
	wantErr(t, r.RunSupported(), "prompt", "Batched")
	r, _ = ParseCompletion([]byte(`{"model":"m","prompt":"x","n":2}`))
	wantErr(t, r.RunSupported(), "n", "n > 1")
}

func TestParseEmbedding(t *testing.T) {
	big := `{"model":"m","input":[` + strings.Repeat(`"a",`, MaxEmbeddingInputs) + `"a"]}`
	cases := []struct{ name, body, param, msg string }{
		{"missing input", `{"model":"m"}`, "input", "Missing"},
		{"empty string", `{"model":"m","input":""}`, "input", "non-empty"},
		{"empty element", `{"model":"m","input":["a",""]}`, "input[1]", "non-empty"},
		{"empty token array", `{"model":"m","input":[[1],[]]}`, "input[1]", "non-empty"},
		{"object", `{"model":"m","input":{}}`, "input", "but got an object"},
		{"too many", big, "input", "at most 2048"},
		{"bad format", `{"model":"m","input":"x","encoding_format":"hex"}`, "encoding_format", "'hex'"},
		{"format number", `{"model":"m","input":"x","encoding_format":1}`, "encoding_format", "expected a string"},
		{"dimensions zero", `{"model":"m","input":"x","dimensions":0}`, "dimensions", "between 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEmbedding([]byte(tc.body))
			wantErr(t, err, tc.param, tc.msg)
		})
	}
	r, err := ParseEmbedding([]byte(`{"model":"e","input":["ab","cdef"],"encoding_format":"base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.InputCount != 2 || r.EncodingFormat != EncodingBase64 || r.PromptBytes != 6 {
		t.Fatalf("request = %+v", r)
	}
	o := r.RenderOptions()
	if o.Model != "e" || o.InputCount != 2 || o.EncodingFormat != EncodingBase64 || o.PromptTokens != 2 {
		t.Fatalf("options = %+v", o)
	}
	r, err = ParseEmbedding([]byte(`{"model":"e","input":[1,2]}`))
	if err != nil || r.InputCount != 1 || r.EncodingFormat != EncodingFloat {
		t.Fatalf("token input: %+v %v", r, err)
	}
}

func TestParseResponses(t *testing.T) {
	r, err := ParseResponses([]byte(`{"model":"m","input":[{"anything":true}],"stream":true}`))
	if err != nil || r.Model != "m" || !r.Stream {
		t.Fatalf("%+v %v", r, err)
	}
	_, err = ParseResponses([]byte(`{"input":"x"}`))
	wantErr(t, err, "model", "Missing")
	_, err = ParseResponses([]byte(`{"model":"m","stream":"x"}`))
	wantErr(t, err, "stream", "expected a boolean")
	_, err = ParseResponses([]byte(`nope`))
	wantErr(t, err, "", "not valid JSON")
}

// A nil *Error must never hide inside a non-nil error interface.
func TestParseNilErrorIsUntyped(t *testing.T) {
	if _, err := ParseChat([]byte(`{"model":"m",` + okMsgs + `}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCompletion([]byte(`{"model":"m","prompt":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseEmbedding([]byte(`{"model":"m","input":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseResponses([]byte(`{"model":"m"}`)); err != nil {
		t.Fatal(err)
	}
}

// tool_choice and parallel_tool_calls narrow what the renderers restore
// from text: none restores nothing, a named function only that function
// (nothing when it is not offered), parallel_tool_calls false one call.
func TestChatRenderOptionsToolChoice(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]`
	for _, c := range []struct {
		members string
		names   string
		single  bool
	}{
		{``, "a,b", false},
		{`,"tool_choice":null,"parallel_tool_calls":null`, "a,b", false},
		{`,"tool_choice":"auto","parallel_tool_calls":true`, "a,b", false},
		{`,"tool_choice":"required","parallel_tool_calls":false`, "a,b", true},
		{`,"tool_choice":"none"`, "", false},
		{`,"tool_choice":{"type":"function","function":{"name":"b"}}`, "b", false},
	} {
		r, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],` + tools + c.members + `}`))
		if err != nil {
			t.Fatalf("%s: %v", c.members, err)
		}
		opts := r.RenderOptions()
		if got := strings.Join(opts.ToolNames, ","); got != c.names || opts.SingleToolCall != c.single {
			t.Errorf("%s: tool names %q, single %v; want %q, %v", c.members, got, opts.SingleToolCall, c.names, c.single)
		}
		if strings.Join(r.ToolNames, ",") != "a,b" {
			t.Errorf("%s: offered names changed to %v", c.members, r.ToolNames)
		}
	}
}
