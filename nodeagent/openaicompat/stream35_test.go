package openaicompat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// runStream35 runs a streamed chat against h.
func runStream35(t *testing.T, h http.HandlerFunc) (*adapter.Result, *fakeRunSink, error) {
	t.Helper()
	srv := newServer(t, h)
	inst := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink := &fakeRunSink{}
	res, err := inst.Run(ctx, &iop.RunRequest{RunId: "r", Operation: adapter.OpChat, Target: "m", Stream: true,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`)}, sink)
	return res, sink, err
}

// TestStreamPausingLongerThanAfterFinishWait: afterFinishWait bounds only
// the wait after the answer is complete. A model that pauses mid-answer
// (a long prefill between two chunks, a slow GPU) longer than that is
// still answering: its stream must not be cut. The upstream here pauses
// twenty times afterFinishWait between its first and second chunk.
func TestStreamPausingLongerThanAfterFinishWait(t *testing.T) {
	old := afterFinishWait
	afterFinishWait = 10 * time.Millisecond
	t.Cleanup(func() { afterFinishWait = old })
	res, sink, err := runStream35(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":""}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":"Hel"}`, ""))
		select { // the model's pause, not a synchronisation
		case <-time.After(20 * afterFinishWait):
		case <-r.Context().Done():
			return
		}
		sseWrite(t, w, vllmChunk(`{"content":"lo"}`, ""))
		sseWrite(t, w, vllmChunk(`{}`, "stop"))
		sseWrite(t, w, vllmUsageChunk(3, 2))
		sseWrite(t, w, vllmDone)
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sink.text() != "Hello" || res.FinishReason != "stop" || res.Usage.GetCompletionTokens() != 2 {
		t.Fatalf("text %q result %+v", sink.text(), res)
	}
}

// TestStreamSendsNoEmptyDeltas: vLLM opens every stream with
// {"role":"assistant","content":""} and llama.cpp sends "content":"" beside
// tool-call and reasoning deltas; an empty piece is no text and must not
// become a run event of its own (each is a wire frame to the Edge).
func TestStreamSendsNoEmptyDeltas(t *testing.T) {
	_, sink, err := runStream35(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":""}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":"Hi"}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":""}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":""}`, "stop"))
		sseWrite(t, w, vllmDone)
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if strings.Join(sink.deltas, "|") != "Hi" {
		t.Fatalf("deltas %q, want only %q", sink.deltas, "Hi")
	}
}

// TestToolCallWithoutIndexRepeatingItsID: a server that omits index and
// repeats the call's id on every fragment streams one call at a time: a
// fragment with the last call's id continues it (a new call with no name
// would be dropped, and the arguments with it).
func TestToolCallWithoutIndexRepeatingItsID(t *testing.T) {
	_, res := feedEvents(t,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	)
	jsonEqual(t, res.Metadata[adapter.MetaToolCalls], `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},`+
		`{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]`)
}

// TestWholeAnswerToolCallsKeepListOrder: the calls of a whole message are
// in the order of its list, whatever index members they carry (the
// message shape has none; a server that writes them anyway is not asking
// for a reordering).
func TestWholeAnswerToolCallsKeepListOrder(t *testing.T) {
	_, res := feedEvents(t,
		`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[`+
			`{"id":"call_a","index":1,"type":"function","function":{"name":"a","arguments":"{}"}},`+
			`{"id":"call_b","index":0,"type":"function","function":{"name":"b","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	)
	jsonEqual(t, res.Metadata[adapter.MetaToolCalls], `[{"id":"call_a","type":"function","function":{"name":"a","arguments":"{}"}},`+
		`{"id":"call_b","type":"function","function":{"name":"b","arguments":"{}"}}]`)
}

// TestToolCallBoundsAreExact: adapter.MaxToolCalls calls, and names and
// arguments of adapter.MaxToolCallBytes, are within the bounds; one call
// or one byte more is past them.
func TestToolCallBoundsAreExact(t *testing.T) {
	call := func(i int) []byte {
		return fmt.Appendf(nil, `{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_%d","type":"function","index":%d,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`, i, i)
	}
	st := &streamState{sink: &fakeRunSink{}}
	for i := range adapter.MaxToolCalls {
		if err := st.event(call(i)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if err := st.event(call(adapter.MaxToolCalls)); !errors.Is(err, adapter.ErrAnswerTooLarge) {
		t.Fatalf("call %d: err = %v, want ToolCallsTooLarge", adapter.MaxToolCalls+1, err)
	}

	st = &streamState{sink: &fakeRunSink{}}
	first := `{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","index":0,"function":{"name":"f","arguments":"` +
		strings.Repeat("a", adapter.MaxToolCallBytes-len("f")) + `"}}]},"finish_reason":null}]}`
	if err := st.event([]byte(first)); err != nil {
		t.Fatalf("%d bytes: %v", adapter.MaxToolCallBytes, err)
	}
	more := `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"finish_reason":null}]}`
	if err := st.event([]byte(more)); !errors.Is(err, adapter.ErrAnswerTooLarge) {
		t.Fatalf("%d bytes: err = %v, want ToolCallsTooLarge", adapter.MaxToolCallBytes+1, err)
	}
}

// TestToolCallsWithoutFinishReason: a stream that ends with "[DONE]" and
// never named a finish_reason, having sent tool calls, finished for its
// calls: OpenAI's "tool_calls", as for a plain "stop".
func TestToolCallsWithoutFinishReason(t *testing.T) {
	res, _, err := runStream35(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","index":0,"function":{"name":"get_time","arguments":"{}"}}]}`, ""))
		sseWrite(t, w, vllmDone)
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.FinishReason != "tool_calls" {
		t.Fatalf("finish %q, want tool_calls", res.FinishReason)
	}
}

// TestStreamSkipsWhatIsNoAnswer: what a stream may carry beside its
// answer is skipped, and the answer around it stands:
//   - a choice of another index than 0 (a run carries choice 0; negative
//     ones included, which no server sends but a hostile one may);
//   - a data event that is not a JSON object (a proxy's heartbeat such as
//     "data: ping", a bare string): no chunk of the answer, no fault of it;
//   - "error":null, which servers that serialise every optional member put
//     on ordinary chunks.
func TestStreamSkipsWhatIsNoAnswer(t *testing.T) {
	for name, events := range map[string][]string{
		"other choices": {
			`data: {"choices":[{"index":-1,"delta":{"content":"not this"},"finish_reason":null},{"index":0,"delta":{"content":"Hi there"},"finish_reason":null}]}`,
			`data: {"choices":[{"index":-1,"delta":{},"finish_reason":"length"},{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		},
		"data that is no object": {
			`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
			`data: ping`,
			`data: "keep-alive"`,
			`data: {"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"stop"}]}`,
		},
		"null error": {
			`data: {"id":"c1","object":"chat.completion.chunk","error":null,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi there"},"finish_reason":null}],"usage":null}`,
			`data: {"id":"c1","object":"chat.completion.chunk","error":null,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			res, sink, err := runStream35(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				for _, ev := range events {
					sseWrite(t, w, ev+"\n\n")
				}
				sseWrite(t, w, vllmDone)
			})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if sink.text() != "Hi there" || res.FinishReason != "stop" {
				t.Fatalf("text %q finish %q", sink.text(), res.FinishReason)
			}
		})
	}
}
