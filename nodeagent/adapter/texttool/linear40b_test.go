package texttool

import (
	"fmt"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testlinear"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestInputIsLinear40b: a conversation of many tool calls and results
// (a client's, of up to the edge's message bound) is rendered in the
// text form at a cost that grows with its length: four times the turns
// must cost well under the sixteen times a rescan per turn would.
func TestInputIsLinear40b(t *testing.T) {
	testlinear.SkipUnderRace(t)
	input := func(n int) *iop.RunInput {
		in := &iop.RunInput{Tools: []*iop.ToolDefinition{{Name: "f", Parameters: []byte(`{"type":"object"}`)}}}
		for i := range n {
			id := fmt.Sprint("c", i)
			in.Messages = append(in.Messages,
				&iop.ChatMessage{Role: iop.ChatRole_CHAT_ROLE_ASSISTANT, ToolCalls: []*iop.ToolCall{
					{Id: id, Name: "f", Arguments: `{"q": "x"}`}, {Id: id + "b", Name: "f", Arguments: "not json"}}},
				&iop.ChatMessage{Role: iop.ChatRole_CHAT_ROLE_TOOL, ToolCallId: id, Content: []*iop.ContentPart{textPart("r")}},
				&iop.ChatMessage{Role: iop.ChatRole_CHAT_ROLE_TOOL, ToolCallId: id + "b", Content: []*iop.ContentPart{textPart("s")}})
		}
		return in
	}
	fastest := func(in *iop.RunInput) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 3 {
			start := time.Now()
			Input(in)
			best = min(best, time.Since(start))
		}
		return best
	}
	const n = 1 << 10
	small, large := fastest(input(n)), fastest(input(4*n))
	ratio := float64(large) / float64(max(small, 50*time.Microsecond))
	t.Logf("n=%d %v, 4n %v (%.1f×)", n, small, large, ratio)
	if ratio > 10 {
		t.Errorf("n=%d turns took %v, 4n %v (%.1f×): superlinear", n, small, large, ratio)
	}
}
