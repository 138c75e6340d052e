package anthropicapi

import (
	"encoding/json"
	"testing"
)

// TunnelChat renders earlier thinking under the member asked for, the
// same bytes as the run's for vLLM's; llama.cpp's member carries the same
// text and nothing else differs; none leaves it out with the middle empty
// turn. Rendering again from another member's body gives the same bytes
// as from the run's (the caller keeps one rendering and renders again on
// a failover to another kind of server).
func TestTunnelChatReasoningMembers(t *testing.T) {
	r := mustParse(t, `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"},`+
		`{"role":"assistant","content":[{"type":"thinking","thinking":"wait"},{"type":"text","text":""}]},{"role":"user","content":"go"},`+
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Plan."},{"type":"redacted_thinking","data":"x"},{"type":"thinking","thinking":" Act."},{"type":"text","text":"Done."}]},`+
		`{"role":"user","content":"next"}]}`)
	run, err := r.OpenAIChat()
	if err != nil {
		t.Fatal(err)
	}
	want := map[ReasoningMember]string{
		ReasoningVLLM: `[{"role":"user","content":"hi"},{"role":"assistant","content":"","reasoning":"wait"},{"role":"user","content":"go"},` +
			`{"role":"assistant","content":"Done.","reasoning":"Plan. Act."},{"role":"user","content":"next"}]`,
		ReasoningContent: `[{"role":"user","content":"hi"},{"role":"assistant","content":"","reasoning_content":"wait"},{"role":"user","content":"go"},` +
			`{"role":"assistant","content":"Done.","reasoning_content":"Plan. Act."},{"role":"user","content":"next"}]`,
		ReasoningNone: `[{"role":"user","content":"hi"},{"role":"user","content":"go"},{"role":"assistant","content":"Done."},{"role":"user","content":"next"}]`,
	}
	for member, msgs := range want {
		got, err := r.TunnelChat(run, member)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(got, &body); err != nil {
			t.Fatal(err)
		}
		if string(body.Messages) != msgs {
			t.Errorf("member %q:\n got %s\nwant %s", member, body.Messages, msgs)
		}
		if member == ReasoningVLLM && string(got) != string(run) {
			t.Errorf("vLLM's rendering differs from the run's:\n%s\n%s", got, run)
		}
		for _, from := range []ReasoningMember{ReasoningNone, ReasoningContent} {
			prev, err := r.TunnelChat(run, from)
			if err != nil {
				t.Fatal(err)
			}
			again, err := r.TunnelChat(prev, member)
			if err != nil || string(again) != string(got) {
				t.Errorf("member %q rendered from %q's body:\n%s\nwant %s (%v)", member, from, again, got, err)
			}
		}
	}
}
