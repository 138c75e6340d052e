package openaiapi

import (
	"errors"
	"testing"
)

// An assistant's earlier refusal comes back in the conversation as a
// content part {"type":"refusal","refusal":…} (OpenAI's assistant content
// parts are text and refusal): the run path carries it as the text it is,
// and a part without its refusal is refused up front, as OpenAI does.
func TestRefusalContentPart(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"help"},` +
		`{"role":"assistant","content":[{"type":"refusal","refusal":"I can't help with that."}]},{"role":"user","content":"why?"}]}`
	r, err := ParseChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if want := len("help") + len("I can't help with that.") + len("why?"); r.PromptBytes != want {
		t.Errorf("PromptBytes %d, want %d", r.PromptBytes, want)
	}
	in, err := r.RunInput()
	if err != nil {
		t.Fatalf("run input: %v", err)
	}
	parts := in.GetMessages()[1].GetContent()
	if len(parts) != 1 || parts[0].GetText() != "I can't help with that." {
		t.Fatalf("assistant content %v", parts)
	}

	for part, param := range map[string]string{
		`{"type":"refusal"}`:                "messages[0].content[0].refusal",
		`{"type":"refusal","refusal":null}`: "messages[0].content[0].refusal",
		`{"type":"refusal","refusal":7}`:    "messages[0].content[0].refusal",
		`{"type":"refusal","Refusal":"x"}`:  "messages[0].content[0].Refusal",
	} {
		_, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"assistant","content":[` + part + `]}]}`))
		var e *Error
		if !errors.As(err, &e) || e.Param == nil || *e.Param != param {
			t.Errorf("%s: %v, want a 400 for %s", part, err, param)
		}
	}
}
