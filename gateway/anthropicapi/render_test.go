package anthropicapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRenderMessage(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		stops []string
		want  string // the response without its id
	}{
		{
			name: "text, stop",
			in: `{"id":"chatcmpl-1","object":"chat.completion","model":"upstream","choices":[{"index":0,"message":{"role":"assistant","content":"Hello <b>"},
				"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`,
			// The model that answered, as the completion names it.
			want: `{"type":"message","role":"assistant","model":"upstream","content":[{"type":"text","text":"Hello <b>"}],
				"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":3}}`,
		},
		{
			name:  "vLLM stop string in stop_sequences",
			in:    `{"choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop","stop_reason":"END"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			stops: []string{"x", "END"},
			want: `{"type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"a"}],
				"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":1,"output_tokens":1}}`,
		},
		{
			name:  "vLLM stop token id or unknown string is end_turn",
			in:    `{"choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop","stop_reason":151645}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			stops: []string{"151645"},
			want: `{"type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"a"}],
				"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`,
		},
		{
			name: "length",
			in:   `{"choices":[{"index":0,"message":{"content":"abc"},"finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":16}}`,
			want: `{"type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"abc"}],
				"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":2,"output_tokens":16}}`,
		},
		{
			name: "tool calls, null content, bad arguments become {}",
			in: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
				{"id":"call_2","type":"function","function":{"name":"f","arguments":"{\"cut"}},
				{"id":"call_3","type":"function","function":{"name":"g","arguments":"[1]"}},
				{"id":"call_4","type":"function","function":{"name":"h","arguments":""}}]},
				"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":9}}`,
			want: `{"type":"message","role":"assistant","model":"claude-x","content":[
				{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},
				{"type":"tool_use","id":"call_2","name":"f","input":{}},
				{"type":"tool_use","id":"call_3","name":"g","input":{}},
				{"type":"tool_use","id":"call_4","name":"h","input":{}}],
				"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":9}}`,
		},
		{
			name: "text and tool with finish stop is tool_use",
			in: `{"choices":[{"index":0,"message":{"content":"Let me check.","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
				"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":9}}`,
			want: `{"type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Let me check."},
				{"type":"tool_use","id":"c","name":"f","input":{}}],
				"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":9}}`,
		},
		{
			name: "content_filter is refusal; empty text gives no block",
			in:   `{"choices":[{"index":0,"message":{"content":""},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":5,"completion_tokens":0}}`,
			want: `{"type":"message","role":"assistant","model":"claude-x","content":[],
				"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":0}}`,
		},
		{
			name: "no usage: output estimated, choice 0 picked",
			in:   `{"choices":[{"index":1,"message":{"content":"other"},"finish_reason":"stop"},{"index":0,"message":{"content":"12345678"},"finish_reason":null}]}`,
			want: `{"type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"12345678"}],
				"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":2}}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := RenderMessage([]byte(c.in), "claude-x", c.stops, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatal(err)
			}
			var id string
			if json.Unmarshal(m["id"], &id) != nil || !strings.HasPrefix(id, "msg_") || len(id) < 20 {
				t.Fatalf("id %s", m["id"])
			}
			want := `{"id":"` + id + `",` + compact(t, c.want)[1:]
			if string(got) != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestRenderMessageToolIDs(t *testing.T) {
	got, err := RenderMessage([]byte(`{"choices":[{"index":0,"message":{"function_call":{"name":"f","arguments":"{\"a\":1}"}},"finish_reason":"function_call"}]}`), "m", nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Content []struct {
			Type, ID, Name string
			Input          json.RawMessage
		}
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 1 || m.Content[0].Type != "tool_use" || !strings.HasPrefix(m.Content[0].ID, "toolu_") ||
		m.Content[0].Name != "f" || string(m.Content[0].Input) != `{"a":1}` || m.StopReason != StopToolUse {
		t.Fatalf("%s", got)
	}
}

func TestRenderMessageMalformed(t *testing.T) {
	for _, in := range []string{``, `[]`, `{"choices":[]}`, `{}`, `{"choices":[{"message":{"content":5}}]}`, `<html>`} {
		if _, err := RenderMessage([]byte(in), "m", nil, 0, false); !errors.Is(err, ErrMalformedUpstream) {
			t.Errorf("%q: %v", in, err)
		}
	}
}
