package ollama

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Ollama cannot force a call, but a tool_choice naming a function must at
// least keep the model from calling another: only that tool is offered. A
// name among no tools leaves them all (the upstream has nothing better).
func TestToolChoiceFunctionOffersOnlyThatTool(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"delete_files"}}]`
	cases := []struct{ name, choice, want string }{
		{"named", `{"type":"function","function":{"name":"get_weather"}}`, `[{"type":"function","function":{"name":"get_weather"}}]`},
		{"named second", `{"type":"function","function":{"name":"delete_files"}}`, `[{"type":"function","function":{"name":"delete_files"}}]`},
		{"unknown name", `{"type":"function","function":{"name":"other"}}`, `[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"delete_files"}}]`},
		{"required", `"required"`, `[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"delete_files"}}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/chat", ndjson(chatLineFinal))
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			in := `{"messages":[{"role":"user","content":"hi"}],` + tools + `,"tool_choice":` + c.choice + `}`
			if _, _, err := runChat(t, inst, in); err != nil {
				t.Fatalf("Run: %v", err)
			}
			wantJSON(t, "tools", decodeBody(t, f.request(t).body)["tools"], c.want)
		})
	}
}
