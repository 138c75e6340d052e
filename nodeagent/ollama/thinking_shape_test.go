package ollama

import (
	"context"
	"slices"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A generate line that carries thinking without a response member (a
// proxy in front of Ollama that drops empty members) still relays its
// reasoning: only the stream as a whole must carry the answer's field.
func TestGenerateThinkingWithoutResponseMember(t *testing.T) {
	f := newFake(t)
	f.handle("/api/generate", ndjson(`{"model":"qwen3","thinking":"Hmm.","done":false}`, genLineAns, genLineDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	sink := &reasonSink{}
	if _, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpCompletion, Target: "qwen3", Input: &iop.RunInput{Prompt: "a haiku"},
	}, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := sink.got(), []string{"r:Hmm.", "d:Blue"}; !slices.Equal(got, want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
}
