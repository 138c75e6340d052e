package ollama

import (
	"errors"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A stream that keeps sending tool calls fails the run at
// adapter.MaxToolCalls, and one whose arguments outgrow
// adapter.MaxToolCallBytes fails too, instead of collecting them all.
func TestToolCallsBounded(t *testing.T) {
	big := `{"model":"qwen3","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":"` +
		strings.Repeat("x", 1<<20) + `"}}}]},"done":false}`
	for name, lines := range map[string][]string{
		"many calls":     append(repeat(chatLineToolCall, adapter.MaxToolCalls+1), chatLineToolDone),
		"long arguments": append(repeat(big, adapter.MaxToolCallBytes>>20+1), chatLineToolDone),
	} {
		f := newFake(t)
		f.handle("/api/chat", ndjson(lines...))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
		_, _, err := runChat(t, inst, simpleChat)
		var ae *adapter.Error
		if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || !errors.Is(err, adapter.ErrAnswerTooLarge) {
			t.Errorf("%s: err = %v, want ToolCallsTooLarge", name, err)
		}
	}
	// At the bound itself, the calls are kept.
	f := newFake(t)
	f.handle("/api/chat", ndjson(append(repeat(chatLineToolCall, adapter.MaxToolCalls), chatLineToolDone)...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	if _, _, err := runChat(t, inst, simpleChat); err != nil {
		t.Fatalf("%d calls: %v", adapter.MaxToolCalls, err)
	}
}

func repeat(line string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = line
	}
	return out
}
