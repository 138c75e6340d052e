package ollama

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Only an assistant turn's tool calls reach Ollama (natively) or the
// prompt (texttool renders assistant calls only), so only theirs are held
// to the object rule: calls a client left on another role are ignored
// alike in both forms, never a 400 in one of them.
func TestHistoryArgumentsCheckedOnAssistantTurnsOnly(t *testing.T) {
	for name, mode := range map[string]iop.ToolMode{
		"native": iop.ToolMode_TOOL_MODE_NATIVE,
		"text":   iop.ToolMode_TOOL_MODE_TEXT,
	} {
		f := newFake(t)
		f.handle("/api/chat", ndjson(textCallLines...))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, ToolMode: mode})
		in := testinput.Chat(toolChat)
		in.Messages[1].ToolCalls = []*iop.ToolCall{{Id: "call_0", Name: "get_weather", Arguments: "[1]"}}
		_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Target: "gemma:2b", Input: in}, newSink())
		if err != nil {
			t.Fatalf("%s: a user turn's tool call refused: %v", name, err)
		}
		f.request(t)
	}
}

// The fold's bounds: "A" and "Z" are letters to fold, in the check that
// decides whether there is anything to fold as in the fold itself.
func TestModelKeyFoldsTheEdgeLetters(t *testing.T) {
	wantModelKeys(t, map[string]string{
		"Alpha:v1": "alpha:v1",
		"Zeta:v1":  "zeta:v1",
		"zetA":     "zeta:latest",
		"alphZ":    "alphz:latest",
	})
}

// wantModelKeys checks modelKey on each name of want.
func wantModelKeys(t *testing.T, want map[string]string) {
	t.Helper()
	for in, key := range want {
		if got := modelKey(in); got != key {
			t.Errorf("modelKey(%q) = %q, want %q", in, got, key)
		}
	}
}
