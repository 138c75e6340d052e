package anthropicapi

import (
	"strings"
	"testing"
)

// vLLM's stop_reason names the stop string that ended the output; only one
// of the request's stop_sequences makes the answer a stop_sequence (a stop
// string the server added itself is an ordinary end of turn), whole or
// streamed.
func TestStopSequenceOnlyForRequestedStrings(t *testing.T) {
	const answer = `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop","stop_reason":"</s>"}]}`
	out, err := RenderMessage([]byte(answer), "m", []string{"END"}, 1, false)
	if err != nil || !strings.Contains(string(out), `"stop_reason":"end_turn","stop_sequence":null`) {
		t.Fatalf("%s, %v", out, err)
	}
	s, buf, _ := newTestStream([]string{"END"})
	if err := s.Whole([]byte(answer)); err != nil || s.StopReason() != StopEndTurn {
		t.Fatalf("streamed: %v, stop reason %s:\n%s", err, s.StopReason(), buf)
	}
}
