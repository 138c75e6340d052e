package mock

import (
	"context"
	"slices"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// reasonSink records answer and reasoning deltas in one sequence
// ("r:" marks reasoning); it is an adapter.ReasoningSink.
type reasonSink struct{ got []string }

func (s *reasonSink) Delta(text string) error     { s.got = append(s.got, text); return nil }
func (s *reasonSink) Reasoning(text string) error { s.got = append(s.got, "r:"+text); return nil }

func runReasoning(t *testing.T, inst adapter.Instance, op iop.RunOperation, input string, sink adapter.RunSink) *adapter.Result {
	t.Helper()
	res, err := inst.Run(context.Background(), &iop.RunRequest{Operation: op, Input: testinput.For(op, input)}, sink)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// With the reasoning setting a chat run sends its words as reasoning,
// through adapter.Reasoning, before the echo; they count as completion
// tokens and against max_tokens. A completion run does not reason.
func TestReasoningSetting(t *testing.T) {
	inst := newMock(t, map[string]string{SettingReasoning: " Let me\n think. "})
	sink := &reasonSink{}
	res := runReasoning(t, inst, adapter.OpChat, `{"messages":[{"role":"user","content":"hello world"}]}`, sink)
	want := []string{"r:Let", "r: me", "r: think.", "hello", " world"}
	if !slices.Equal(sink.got, want) {
		t.Fatalf("deltas %q, want %q", sink.got, want)
	}
	if res.FinishReason != "stop" || res.Usage.GetCompletionTokens() != 5 || res.Usage.GetTotalTokens() != 7 {
		t.Errorf("result %+v, usage %v", res, res.Usage)
	}

	sink = &reasonSink{}
	res = runReasoning(t, inst, adapter.OpChat, `{"max_tokens":4,"messages":[{"role":"user","content":"hello world"}]}`, sink)
	if want := want[:4]; !slices.Equal(sink.got, want) || res.FinishReason != "length" || res.Usage.GetCompletionTokens() != 4 {
		t.Errorf("max_tokens 4: deltas %q, finish %q, usage %v", sink.got, res.FinishReason, res.Usage)
	}

	sink = &reasonSink{}
	runReasoning(t, inst, adapter.OpCompletion, `{"prompt":"hello world"}`, sink)
	if want := []string{"hello", " world"}; !slices.Equal(sink.got, want) {
		t.Errorf("completion deltas %q, want %q", sink.got, want)
	}

	// A sink that takes no reasoning gets the answer only.
	plain := newSink()
	runReasoning(t, inst, adapter.OpChat, `{"messages":[{"role":"user","content":"hello world"}]}`, plain)
	if got := plain.got(); !slices.Equal(got, []string{"hello", " world"}) {
		t.Errorf("plain sink deltas %q", got)
	}
}
