package openaiapi

import (
	"slices"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The text-fallback mark may come on a delta that carries reasoning too.
// What the mark releases (a call held for it, the reasoning held behind
// that call) came before this delta's reasoning and goes out first: the
// new reasoning used to be written at once, ahead of the call and of the
// reasoning the model produced before it.
func TestMarkOnReasoningDeltaKeepsOrder(t *testing.T) {
	call := `<tool_call>{"name":"lookup","arguments":{"q":"x"}}</tool_call>`
	markedDelta := &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: "r2", Delta: " ok", Metadata: fallbackMeta}
	raw, w, err := runStream(t, RenderOptions{Model: "m", ToolNames: offered},
		evStart(nil), evDelta("Look. "+call), evReasoning("r1"), markedDelta, evComplete("stop", nil, nil))
	if err != nil || w.Failure() != nil {
		t.Fatalf("%v %v", err, w.Failure())
	}
	want := []string{"c:Look. ", "t:lookup", "r:r1r2", "c: ok"}
	if got := streamOrder(t, raw); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
