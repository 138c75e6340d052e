package anthropicapi

import (
	"encoding/json"
	"testing"
)

// A tool call's arguments with whitespace around the object (a model's raw
// output, as some tool parsers pass it on) are still the call's input in a
// whole answer, as they are in a stream, where the client's SDK parses the
// concatenated partial_json.
func TestRenderMessageToolArgumentsWithSurroundingWhitespace(t *testing.T) {
	in := `{"choices":[{"index":0,"message":{"content":null,"tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"\n {\"city\": \"Paris\"} \n"}}]},
		"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
	out, err := RenderMessage([]byte(in), "claude-x", nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Content []struct {
			Type  string          `json:"type"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Content) != 1 || string(resp.Content[0].Input) != `{"city":"Paris"}` {
		t.Fatalf("content = %s, want one tool_use with input {\"city\":\"Paris\"}", out)
	}
}
