package openaicompat

import (
	"encoding/json"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// In the text tool-call form too, the assistant turn that called the tool
// (now <tool_call> text) carries its reasoning under the backend's member.
func TestTextFormKeepsHistoryReasoning(t *testing.T) {
	for kind, member := range map[string]string{TypeVLLM: reasoningMember, TypeOpenAICompat: ""} {
		t.Run(kind, func(t *testing.T) {
			build := func(base string) *Instance {
				cfg := testConfig(base)
				cfg.ToolMode = iop.ToolMode_TOOL_MODE_TEXT
				return newTestInstance(t, kind, cfg)
			}
			var msgs []map[string]json.RawMessage
			if err := json.Unmarshal([]byte(messagesSent(t, build, toolLoopWithReasoning)), &msgs); err != nil {
				t.Fatal(err)
			}
			var call map[string]json.RawMessage // the assistant turn that called
			for _, m := range msgs {
				var c string
				_ = json.Unmarshal(m["content"], &c)
				if string(m["role"]) == `"assistant"` && strings.Contains(c, "<tool_call>") {
					call = m
				}
			}
			if call == nil {
				t.Fatal("no assistant turn in text form")
			}
			want := `"The user wants the weather; call get_weather."`
			for _, name := range []string{reasoningMember, reasoningContentMember} {
				got, ok := call[name]
				if name == member && string(got) != want || name != member && ok {
					t.Fatalf("turn %s: member %s = %s, want the reasoning under %q only", call["content"], name, got, member)
				}
			}
		})
	}
}
