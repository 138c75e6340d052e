package ollama

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An earlier tool call whose arguments are JSON but no object (or no JSON
// at all) is refused in the text form exactly as natively: Ollama types
// /api/chat's arguments as an object, so the model is never shown
// arguments Ollama would not take. The refusal comes before any request,
// the capability lookup included, and names the call; its message is the
// same whichever form the run would have taken.
func TestHistoryNonObjectArgumentsRefusedInEveryForm(t *testing.T) {
	for kind, args := range map[string]string{
		"array":   `[1,2]`,
		"number":  `3`,
		"null":    `null`,
		"string":  `"Paris"`,
		"boolean": `true`,
		"no JSON": `{"city":`,
	} {
		t.Run(kind, func(t *testing.T) {
			text, err := json.Marshal(args)
			if err != nil {
				t.Fatal(err)
			}
			history := `{"messages":[{"role":"user","content":"Weather in Paris?"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":` + string(text) + `}}]},` +
				`{"role":"tool","tool_call_id":"call_1","content":"Sunny"}],` +
				`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`
			messages := map[string]string{}
			for name, mode := range map[string]iop.ToolMode{
				"native":              iop.ToolMode_TOOL_MODE_NATIVE,
				"text":                iop.ToolMode_TOOL_MODE_TEXT,
				"auto, without tools": iop.ToolMode_TOOL_MODE_AUTO,
			} {
				f := newFake(t)
				f.handle("/api/show", jsonStatus(200, showNoTools))
				f.handle("/api/chat", ndjson(textCallLines...))
				inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, ToolMode: mode})
				_, _, err := runTarget(t, inst, "gemma:2b", history)
				var ae *adapter.Error
				if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || !errors.Is(err, errBadInput) {
					t.Fatalf("%s: err = %v, want invalid_request", name, err)
				}
				if !strings.HasPrefix(ae.Message, "messages[1].tool_calls[0]: ") {
					t.Errorf("%s: message %q does not name the call", name, ae.Message)
				}
				messages[ae.Message] = name
				// The run has returned: anything it sent was captured.
				if n, m := len(f.reqs), len(f.shows); n+m != 0 {
					t.Errorf("%s: %d requests and %d lookups sent for a refused input", name, n, m)
				}
			}
			if len(messages) != 1 {
				t.Errorf("the forms refuse differently: %v", messages)
			}
		})
	}
}

// The refusal is of the arguments' kind, not of tool calls in the text
// form: an object (with blanks around it), empty text and the empty
// object still go, written as objects.
func TestHistoryObjectArgumentsStillSentInTextForm(t *testing.T) {
	for _, args := range []string{`{"city":"Paris"}`, ``, `{}`, ` {"city":"Paris"} `} {
		text, _ := json.Marshal(args)
		history := `{"messages":[{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":` + string(text) + `}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"Sunny"}],` +
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`
		f := newFake(t)
		f.handle("/api/chat", ndjson(textCallLines...))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, ToolMode: iop.ToolMode_TOOL_MODE_TEXT})
		if _, _, err := runTarget(t, inst, "gemma:2b", history); err != nil {
			t.Fatalf("arguments %q: %v", args, err)
		}
		if body := string(f.request(t).body); !strings.Contains(body, `\u003ctool_call\u003e{\"name\":\"get_weather\",\"arguments\":{`) {
			t.Fatalf("arguments %q: body %s holds no object call", args, body)
		}
	}
}
