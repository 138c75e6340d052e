package openaiapi

import (
	"encoding/json"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A stream that begins with reasoning begins, as every chat stream does,
// with the assistant role chunk; an event carrying reasoning and text
// (the switch from thinking to the answer) sends its reasoning first,
// with no tools offered too.
func TestChatStreamReasoningFirstChunk(t *testing.T) {
	opts := RenderOptions{ID: "chatcmpl-1", Model: "m", Created: 1}
	raw, _, err := runStream(t, opts, evReasoning("Hmm."),
		&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: " Yes.", Delta: "Hi"},
		evComplete("stop", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	data := sseData(t, raw)
	var first struct {
		Choices []struct {
			Delta map[string]json.RawMessage `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(data[0]), &first); err != nil {
		t.Fatal(err)
	}
	if len(first.Choices) != 1 || string(first.Choices[0].Delta["role"]) != `"assistant"` || first.Choices[0].Delta["reasoning"] != nil {
		t.Errorf("first chunk %s, want the role chunk", data[0])
	}
	if got, want := reasoningDeltas(t, raw), []string{"r:Hmm.", "r: Yes.", "c:Hi"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("deltas %q, want %q", got, want)
	}
}

// With no usage from the run, a stream's completion_tokens estimate counts
// the reasoning streamed, as the whole answer's does.
func TestChatStreamReasoningInEstimate(t *testing.T) {
	opts := RenderOptions{ID: "chatcmpl-1", Model: "m", Created: 1, IncludeUsage: true}
	long := strings.Repeat("think ", 400)
	_, with, err := runStream(t, opts, evReasoning(long), evDelta("Hi"), evComplete("stop", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	_, without, err := runStream(t, opts, evDelta("Hi"), evComplete("stop", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	u1, _ := with.Usage()
	u2, _ := without.Usage()
	if u1.CompletionTokens < u2.CompletionTokens+100 {
		t.Errorf("estimated completion tokens %d with %d bytes of reasoning, %d without", u1.CompletionTokens, len(long), u2.CompletionTokens)
	}
}

// A legacy completion holds none of the reasoning it cannot show: it does
// not count against MaxAnswerBytes, so text within the bound is answered
// however long the model thought.
func TestCompletionReasoningNotHeld(t *testing.T) {
	a := NewCompletionAggregator(RenderOptions{})
	half := strings.Repeat("r", MaxAnswerBytes/2+1)
	if a.Add(evReasoning(half)) || a.Add(evDelta(half)) {
		t.Fatal("stopped before the end")
	}
	if !a.Add(evComplete("stop", nil, nil)) || a.Abandoned() {
		t.Fatal("a completion within the bound was abandoned")
	}
	if _, e := a.Result(); e != nil {
		t.Errorf("Result: %v", e)
	}
}
