package openaicompat

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

type resultCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func resultCalls(t *testing.T, res *adapter.Result) []resultCall {
	t.Helper()
	var calls []resultCall
	if err := json.Unmarshal([]byte(res.Metadata[adapter.MetaToolCalls]), &calls); err != nil {
		t.Fatalf("tool calls %q: %v", res.Metadata[adapter.MetaToolCalls], err)
	}
	return calls
}

// TestWholeAnswerToolCallsAreSeparate: in a whole answer (a server that
// ignored "stream") every element of message.tool_calls is a call of its
// own, never the continuation of the one before: the message shape has no
// index, and a server that gives no ids (or one id to all) must not have
// its calls glued into one ("ab" called with "{}{}").
func TestWholeAnswerToolCallsAreSeparate(t *testing.T) {
	for name, calls := range map[string]string{
		"no ids":   `[{"type":"function","function":{"name":"a","arguments":"{}"}},{"type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]`,
		"same ids": `[{"id":"0","type":"function","function":{"name":"a","arguments":"{}"}},{"id":"0","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]`,
	} {
		t.Run(name, func(t *testing.T) {
			res, _, err := runOnce(t, adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":` + calls + `},"finish_reason":"tool_calls"}]}`))
			})
			if err != nil {
				t.Fatal(err)
			}
			got := resultCalls(t, res)
			if len(got) != 2 || got[0].Function.Name != "a" || got[0].Function.Arguments != "{}" ||
				got[1].Function.Name != "b" || got[1].Function.Arguments != `{"x":1}` {
				t.Fatalf("calls %+v", got)
			}
			if got[0].ID == got[1].ID {
				t.Fatalf("both calls have id %q", got[0].ID)
			}
		})
	}
}

// TestToolCallIDsAreUnique: a stream that gives two calls the same id gets
// a fresh id for the later one, as the Ollama adapter does: a client
// answers each call by its id, and two answers to one id are ambiguous.
func TestToolCallIDsAreUnique(t *testing.T) {
	st := &streamState{sink: &fakeRunSink{}}
	for _, ev := range []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_x","type":"function","index":0,"function":{"name":"a","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_x","type":"function","index":1,"function":{"name":"b","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	} {
		if err := st.event([]byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := st.result()
	if err != nil {
		t.Fatal(err)
	}
	got := resultCalls(t, res)
	if len(got) != 2 || got[0].ID != "call_x" || got[1].ID == "call_x" || got[1].ID == "" {
		t.Fatalf("calls %+v", got)
	}
}

// TestToolCallOrderWithExtremeIndices: calls are ordered by their index
// whatever the numbers (a difference of two would overflow).
func TestToolCallOrderWithExtremeIndices(t *testing.T) {
	st := &streamState{sink: &fakeRunSink{}}
	for _, ev := range []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","index":9223372036854775807,"function":{"name":"last","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c2","index":-2,"function":{"name":"first","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	} {
		if err := st.event([]byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := st.result()
	if err != nil {
		t.Fatal(err)
	}
	if got := resultCalls(t, res); len(got) != 2 || got[0].Function.Name != "first" || got[1].Function.Name != "last" {
		t.Fatalf("calls %+v", got)
	}
}
