package openaiapi

import "testing"

// A tool_choice that asks for a tool ("auto", "required" or a named
// function) with no tools offered is refused as OpenAI refuses it, word for
// word and with the same param; "none" and null ask for nothing and pass.
func TestToolChoiceWithoutToolsIsRefused(t *testing.T) {
	const msg = "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
	for _, body := range []string{
		`"tool_choice":"auto"`,
		`"tool_choice":"required"`,
		`"tool_choice":{"type":"function","function":{"name":"f"}}`,
		`"tool_choice":"auto","tools":null`,
	} {
		r, err := ParseChat([]byte(chatWith(body)))
		if r != nil {
			t.Fatalf("%s: request = %+v, want nil", body, r)
		}
		wantErr(t, err, "tool_choice", msg)
		if e := err.(*Error); e.Message != msg {
			t.Errorf("%s: message = %q, want %q", body, e.Message, msg)
		}
	}
	for _, body := range []string{
		`"tool_choice":"none"`, `"tool_choice":"none","tools":null`, `"tool_choice":null`,
		`"tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}]`,
		`"tool_choice":"required","tools":[{"type":"custom","custom":{"name":"c"}}]`, // a tool, if not a function
	} {
		if _, err := ParseChat([]byte(chatWith(body))); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}
