package openaicompat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A reasoning model's tool loop as a client sends it back: the assistant
// turn that called the tool carries its reasoning (under "reasoning", as
// the edge renders it); an earlier assistant turn has none.
const toolLoopWithReasoning = `{"messages":[` +
	`{"role":"user","content":"Hi"},` +
	`{"role":"assistant","content":"Hello."},` +
	`{"role":"user","content":"Weather in Paris?"},` +
	`{"role":"assistant","content":null,"reasoning":"The user wants the weather; call get_weather.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_1","content":"18C, clear"}],` +
	`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`

// messagesSent runs in on a chat of input against an imitation of vLLM's
// chat endpoint and returns the "messages" member of the body it received,
// byte for byte.
func messagesSent(t *testing.T, build func(baseURL string) *Instance, input string) string {
	t.Helper()
	bodies := make(chan []byte, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":"18C"}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":""}`, "stop"))
		sseWrite(t, w, vllmDone)
	})
	in := build(srv.URL)
	if _, err := in.Run(context.Background(), &iop.RunRequest{Target: "Qwen/Qwen3-8B", Operation: adapter.OpChat, Stream: true,
		Input: testinput.Chat(input)}, &fakeRunSink{}); err != nil {
		t.Fatal(err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(<-bodies, &body); err != nil {
		t.Fatal(err)
	}
	return string(body["messages"])
}

// An assistant turn's earlier reasoning reaches the backend under the
// member it reads: "reasoning" for vLLM, "reasoning_content" for
// llama-server; a plain openai_compat server (possibly a strict one) and
// turns without reasoning get no such member.
func TestHistoryReasoningSentAsTheBackendReadsIt(t *testing.T) {
	const (
		head = `[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`
		tail = `},{"role":"tool","content":"18C, clear","tool_call_id":"call_1"}]`
	)
	llamaServer := func(t *testing.T, base string) *Instance {
		in, err := NewLlamaServer(testConfig(base), adapter.Env{Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.Close() })
		return in
	}
	for name, c := range map[string]struct {
		build func(t *testing.T, base string) *Instance
		want  string
	}{
		"vllm":          {kindAt(TypeVLLM), head + `,"reasoning":"The user wants the weather; call get_weather."` + tail},
		"llama-server":  {llamaServer, head + `,"reasoning_content":"The user wants the weather; call get_weather."` + tail},
		"openai_compat": {kindAt(TypeOpenAICompat), head + tail},
	} {
		t.Run(name, func(t *testing.T) {
			build := func(base string) *Instance { return c.build(t, base) }
			if got := messagesSent(t, build, toolLoopWithReasoning); got != c.want {
				t.Fatalf("messages sent:\n%s\nwant\n%s", got, c.want)
			}
			// Without reasoning in the history, no member at all.
			plain := strings.Replace(toolLoopWithReasoning, `"reasoning":"The user wants the weather; call get_weather.",`, "", 1)
			if got := messagesSent(t, build, plain); got != head+tail {
				t.Fatalf("messages sent without reasoning:\n%s\nwant\n%s", got, head+tail)
			}
		})
	}
}

// kindAt builds an instance of kind against a base URL.
func kindAt(kind string) func(t *testing.T, base string) *Instance {
	return func(t *testing.T, base string) *Instance { return newTestInstance(t, kind, testConfig(base)) }
}
