package ollama

import (
	"slices"
	"testing"
)

// A generate line that carries thinking without a response member (a
// proxy in front of Ollama that drops empty members) still relays its
// reasoning: only the stream as a whole must carry the answer's field.
func TestGenerateThinkingWithoutResponseMember(t *testing.T) {
	if got, want := generateEvents(t, `{"model":"qwen3","thinking":"Hmm.","done":false}`, genLineAns, genLineDone), []string{"r:Hmm.", "d:Blue"}; !slices.Equal(got, want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
}
