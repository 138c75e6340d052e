package mock

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A chat with nothing to echo still answers EmptyReply after its
// reasoning: a client sees an answer, not only the thinking.
func TestReasoningThenEmptyReply(t *testing.T) {
	inst := newMock(t, map[string]string{SettingReasoning: "hmm"})
	sink := &reasonSink{}
	runReasoning(t, inst, adapter.OpChat, `{"messages":[{"role":"user","content":"  "}]}`, sink)
	if want := []string{"r:hmm", EmptyReply}; !slices.Equal(sink.got, want) {
		t.Fatalf("deltas %q, want %q", sink.got, want)
	}
}

// goneSink is a run stream that is gone: reasoning cannot be sent.
type goneSink struct{ calls int }

var errGone = errors.New("stream gone")

func (s *goneSink) Delta(string) error     { s.calls++; return errGone }
func (s *goneSink) Reasoning(string) error { s.calls++; return errGone }

// The run's stream going away while the mock thinks ends the run at once,
// with that error, as it does while it answers.
func TestReasoningSinkErrorEndsRun(t *testing.T) {
	inst := newMock(t, map[string]string{SettingReasoning: "one two three"})
	sink := &goneSink{}
	_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Input: testinput.For(adapter.OpChat, `{"messages":[{"role":"user","content":"hi"}]}`)}, sink)
	if !errors.Is(err, errGone) {
		t.Fatalf("Run error = %v, want one wrapping %v", err, errGone)
	}
	if sink.calls != 1 {
		t.Fatalf("sink called %d times after it failed, want 1 call", sink.calls)
	}
}

// The reasoning setting is a known one: it draws no unknown-setting
// warning, while a typo beside it does.
func TestReasoningSettingKnown(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	if _, err := New(&iop.AdapterConfig{Name: "m", Type: TypeName, Settings: map[string]string{SettingReasoning: "x", "reasonin": "y"}},
		adapter.Env{Logger: zap.New(core)}); err != nil {
		t.Fatalf("New: %v", err)
	}
	entries := logs.FilterMessage("mock: ignoring unknown settings").All()
	if len(entries) != 1 {
		t.Fatalf("warnings = %d, want 1", len(entries))
	}
	keys, _ := entries[0].ContextMap()["keys"].([]any)
	if len(keys) != 1 || keys[0] != "reasonin" {
		t.Fatalf("unknown keys = %v, want [reasonin]", entries[0].ContextMap()["keys"])
	}
}
