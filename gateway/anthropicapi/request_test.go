package anthropicapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestOpenAIChatMapping(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{
			name: "minimal string content",
			in:   `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`,
		},
		{
			name: "system string and sampling fields",
			in: `{"model":"qwen","max_tokens":100,"system":"be brief","temperature":0.5,"top_p":0.9,"top_k":40,
				"stop_sequences":["END","\n\n"],"metadata":{"user_id":"u-1"},"stream":true,
				"thinking":{"type":"enabled","budget_tokens":1024},"service_tier":"auto",
				"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"qwen","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
				"max_tokens":100,"stream":true,"stream_options":{"include_usage":true},"stop":["END","\n\n"],
				"temperature":0.5,"top_p":0.9,"top_k":40,"user":"u-1"}`,
		},
		{
			name: "system blocks, temperature 0 kept, top_k 0 omitted",
			in: `{"model":"m","max_tokens":1,"temperature":0,"top_k":0,
				"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":""},{"type":"text","text":"b"}],
				"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"a\n\nb"},{"role":"user","content":"x"}],"max_tokens":1,"temperature":0}`,
		},
		{
			name: "images base64 and url become parts",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
				{"type":"text","text":"what is <this>?"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}},
				{"type":"image","source":{"type":"url","url":"https://x.test/a.jpg"}}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is <this>?"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR"}},
				{"type":"image_url","image_url":{"url":"https://x.test/a.jpg"}}]}],"max_tokens":5}`,
		},
		{
			name: "tool round trip",
			in: `{"model":"m","max_tokens":5,
				"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object", "properties":{"city":{"type":"string"}}},"cache_control":{"type":"ephemeral"}},
				         {"type":"custom","name":"t2","input_schema":{"type":"object"}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
				"messages":[
				{"role":"user","content":"weather?"},
				{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Checking."},
					{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{ "city" : "Paris" }},
					{"type":"tool_use","id":"toolu_2","name":"t2","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},
					{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"boom"},{"type":"text","text":"again"},
						{"type":"image","source":{"type":"url","url":"http://x.test/p.png"}}]},
					{"type":"text","text":"thanks"}]}]}`,
			want: `{"model":"m","messages":[
				{"role":"user","content":"weather?"},
				{"role":"assistant","content":"Checking.","reasoning":"hmm","tool_calls":[
					{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"toolu_2","type":"function","function":{"name":"t2","arguments":"{}"}}]},
				{"role":"tool","content":"18C","tool_call_id":"toolu_1"},
				{"role":"tool","content":"Error: boom\nagain","tool_call_id":"toolu_2"},
				{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x.test/p.png"}},{"type":"text","text":"thanks"}]}],
				"max_tokens":5,
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
				         {"type":"function","function":{"name":"t2","parameters":{"type":"object"}}}],
				"tool_choice":"auto","parallel_tool_calls":false}`,
		},
		{
			name: "tool-only assistant has null content; results-only user adds no user message",
			in: `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"},
				"messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{"a":[1,2]}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1"},{"type":"tool_result","tool_use_id":"c1","is_error":true}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":[1,2]}"}}]},
				{"role":"tool","content":"","tool_call_id":"c1"},{"role":"tool","content":"Error","tool_call_id":"c1"}],
				"max_tokens":5,"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"required"}`,
		},
		{
			name: "named tool choice",
			in: `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"f"},
				"messages":[{"role":"user","content":"go"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"go"}],"max_tokens":5,
				"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		},
		{
			name: "none keeps parallel calls unset; no tools drops tool_choice",
			in: `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"none","disable_parallel_tool_use":true},
				"messages":[{"role":"user","content":"go"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"go"}],"max_tokens":5,
				"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"none"}`,
		},
		{
			name: "auto without tools is dropped",
			in:   `{"model":"m","max_tokens":5,"tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"go"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"go"}],"max_tokens":5}`,
		},
		{
			name: "empty final assistant prefill is dropped, non-empty kept; empty user text kept",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":""}]},
				{"role":"assistant","content":"Sure"},{"role":"user","content":"more"},{"role":"assistant","content":[]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":""},{"role":"assistant","content":"Sure"},{"role":"user","content":"more"}],"max_tokens":5}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustParse(t, c.in)
			got, err := r.OpenAIChat()
			if err != nil {
				t.Fatal(err)
			}
			if want := compact(t, c.want); string(got) != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestParseRequestFields(t *testing.T) {
	r := mustParse(t, `{"model":"claude-x","max_tokens":7,"stream":true,"stop_sequences":["a"],"messages":[{"role":"user","content":"hi"}]}`)
	if r.Model != "claude-x" || !r.Stream || r.MaxTokens != 7 || len(r.StopSequences) != 1 || r.StopSequences[0] != "a" {
		t.Fatalf("%+v", r)
	}
	// count_tokens bodies have no max_tokens.
	if _, e := ParseCountRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)); e != nil {
		t.Fatal(e)
	}
	if _, e := ParseRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)); e == nil || !strings.Contains(e.Message, "max_tokens") {
		t.Fatalf("max_tokens not required: %v", e)
	}
}

func TestParseRequestRejects(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const base = `"model":"m","max_tokens":5,`
	cases := []struct{ in, want string }{
		{``, "not a valid JSON object"},
		{`[]`, "not a valid JSON object"},
		{`null`, "not a valid JSON object"},
		{`{"model":"m"} {}`, "not a valid JSON object"},
		{`{"model":"m",}`, "not a valid JSON object"},
		{`{"max_tokens":5,` + msgs + `}`, "model: Field required"},
		{`{"model":5,"max_tokens":5,` + msgs + `}`, "model: expected a string"},
		{`{"model":"","max_tokens":5,` + msgs + `}`, "model: must not be empty"},
		{`{"model":"m","max_tokens":0,` + msgs + `}`, "max_tokens: must be between 1"},
		{`{"model":"m","max_tokens":1.5,` + msgs + `}`, "max_tokens: expected an integer"},
		{`{"model":"m","max_tokens":"5",` + msgs + `}`, "max_tokens: expected an integer"},
		{fmt.Sprintf(`{"model":"m","max_tokens":%d,`+msgs+`}`, MaxOutputTokens+1), "max_tokens: must be between 1"},
		{`{` + base + `"messages":[]}`, "messages: at least one message"},
		{`{` + base + `"messages":{}}`, "messages: expected an array"},
		{`{"model":"m","max_tokens":5}`, "messages: Field required"},
		{`{` + base + `"messages":[1]}`, "messages.0: expected an object"},
		{`{` + base + `"messages":[{"role":"system","content":"x"}]}`, `messages.0.role: must be "user" or "assistant"`},
		{`{` + base + `"messages":[{"content":"x"}]}`, `messages.0.role: Field required`},
		{`{` + base + `"messages":[{"role":"user"}]}`, `messages.0.content: Field required`},
		{`{` + base + `"messages":[{"role":"user","content":5}]}`, `messages.0.content: expected a string or an array`},
		{`{` + base + `"messages":[{"role":"user","content":""}]}`, `messages.0.content: must not be empty`},
		{`{` + base + `"messages":[{"role":"assistant","content":""},{"role":"user","content":"x"}]}`, `messages.0.content: must not be empty`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`, `messages.0.content.0.type: content block type "document" is not supported`},
		{`{` + base + `"messages":[{"role":"user","content":[{"text":"x"}]}]}`, `messages.0.content.0.type: Field required`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"text"}]}]}`, `messages.0.content.0.text: Field required`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, `messages.0.content.0.text: expected a string`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`, `tool_use blocks are only allowed in assistant`},
		{`{` + base + `"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, `tool_result blocks are only allowed in user`},
		{`{` + base + `"messages":[{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}`, `image blocks are only allowed in user`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"thinking","thinking":"x"}]}]}`, `thinking blocks are only allowed in assistant`},
		{`{` + base + `"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[1]}]}]}`, `messages.0.content.0.input: expected an object`},
		{`{` + base + `"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"","name":"f","input":{}}]}]}`, `messages.0.content.0.id: must not be empty`},
		{`{` + base + `"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","input":{}}]}]}`, `messages.0.content.0.name: Field required`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, `messages.0.content.0.tool_use_id: Field required`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":"yes"}]}]}`, `is_error: expected a boolean`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"tool_use"}]}]}]}`, `tool_result content block type "tool_use" is not supported`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"x"}}]}]}`, `media_type: must be one of`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":""}}]}]}`, `data: must not be empty`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]}]}`, `url: must be an http or https URL`},
		{`{` + base + `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, `image source type "file" is not supported`},
		{`{` + base + `"system":5,` + msgs + `}`, `system: expected a string or an array`},
		{`{` + base + `"system":[{"type":"image"}],` + msgs + `}`, `system.0.type: only text blocks`},
		{`{` + base + `"temperature":1.5,` + msgs + `}`, `temperature: must be between 0 and 1`},
		{`{` + base + `"temperature":"1",` + msgs + `}`, `temperature: expected a number`},
		{`{` + base + `"top_p":-0.1,` + msgs + `}`, `top_p: must be between 0 and 1`},
		{`{` + base + `"top_k":-1,` + msgs + `}`, `top_k: must be greater than or equal to 0`},
		{`{` + base + `"stop_sequences":"x",` + msgs + `}`, `stop_sequences: expected an array`},
		{`{` + base + `"stop_sequences":[""],` + msgs + `}`, `stop_sequences.0: must not be empty`},
		{`{` + base + `"stream":"true",` + msgs + `}`, `stream: expected a boolean`},
		{`{` + base + `"metadata":{"user_id":1},` + msgs + `}`, `metadata.user_id: expected a string`},
		{`{` + base + `"metadata":{"user_id":"` + strings.Repeat("u", MaxUserIDLen+1) + `"},` + msgs + `}`, `metadata.user_id: at most`},
		{`{` + base + `"thinking":true,` + msgs + `}`, `thinking: expected an object`},
		{`{` + base + `"tools":[{"name":"f"}],` + msgs + `}`, `tools.0.input_schema: Field required`},
		{`{` + base + `"tools":[{"name":"f","input_schema":"x"}],` + msgs + `}`, `tools.0.input_schema: expected an object`},
		{`{` + base + `"tools":[{"name":"bad name","input_schema":{}}],` + msgs + `}`, `tools.0.name: must match`},
		{`{` + base + `"tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}],` + msgs + `}`, `tools.1.name: tool names must be unique`},
		{`{` + base + `"tools":[{"type":"web_search_20250305","name":"web_search"}],` + msgs + `}`, `tools.0.type: tool type "web_search_20250305" is not supported`},
		{`{` + base + `"tool_choice":{"type":"any"},` + msgs + `}`, `tool_choice: type "any" requires tools`},
		{`{` + base + `"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"},` + msgs + `}`, `tool_choice.name: "g" is not one of the offered tools`},
		{`{` + base + `"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool"},` + msgs + `}`, `tool_choice.name: Field required`},
		{`{` + base + `"tool_choice":{"type":"sometimes"},` + msgs + `}`, `tool_choice.type: must be one of`},
		{`{` + base + `"tool_choice":"auto",` + msgs + `}`, `tool_choice: expected an object`},
	}
	for _, c := range cases {
		r, e := ParseRequest([]byte(c.in))
		if e == nil {
			t.Errorf("%s: accepted: %+v", c.in, r)
			continue
		}
		if e.Status != http.StatusBadRequest || e.Type != TypeInvalidRequest || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s:\n got %d %s %q\nwant 400 %q", c.in, e.Status, e.Type, e.Message, c.want)
		}
	}
}

func TestParseRequestBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":5,"messages":[`)
	for i := 0; i <= MaxMessages; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"x"}`)
	}
	b.WriteString(`]}`)
	if _, e := ParseRequest([]byte(b.String())); e == nil || !strings.Contains(e.Message, "at most") {
		t.Fatalf("too many messages accepted: %v", e)
	}

	b.Reset()
	b.WriteString(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[`)
	for i := 0; i <= MaxContentBlocks; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":"x"}`)
	}
	b.WriteString(`]}]}`)
	if _, e := ParseRequest([]byte(b.String())); e == nil || !strings.Contains(e.Message, "content blocks") {
		t.Fatalf("too many blocks accepted: %v", e)
	}

	b.Reset()
	b.WriteString(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[`)
	for i := 0; i <= MaxTools; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","input_schema":{}}`, i)
	}
	b.WriteString(`]}`)
	if _, e := ParseRequest([]byte(b.String())); e == nil || !strings.Contains(e.Message, "tools: at most") {
		t.Fatalf("too many tools accepted: %v", e)
	}

	stops := make([]string, MaxStopSequences+1)
	for i := range stops {
		stops[i] = `"s"`
	}
	in := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"stop_sequences":[` + strings.Join(stops, ",") + `]}`
	if _, e := ParseRequest([]byte(in)); e == nil || !strings.Contains(e.Message, "stop_sequences: at most") {
		t.Fatalf("too many stop sequences accepted: %v", e)
	}
	long := strings.Repeat("a", MaxToolNameLen)
	if _, e := ParseRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"` + long + `","input_schema":{}}]}`)); e != nil {
		t.Fatalf("name of %d bytes refused: %v", MaxToolNameLen, e)
	}
	if _, e := ParseRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"` + long + `a","input_schema":{}}]}`)); e == nil {
		t.Fatal("over-long tool name accepted")
	}
}

func TestParseRequestNullIsAbsent(t *testing.T) {
	r := mustParse(t, `{"model":"m","max_tokens":5,"system":null,"temperature":null,"tools":null,"tool_choice":null,"metadata":{"user_id":null},"stream":null,
		"messages":[{"role":"user","content":"x"}]}`)
	got, err := r.OpenAIChat()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":5}`; string(got) != want {
		t.Fatalf("got %s", got)
	}
}
