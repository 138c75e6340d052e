package anthropicapi

import (
	"strings"
	"testing"

	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// emptyTurnBody is a conversation whose middle assistant turn is blocks.
func emptyTurnBody(blocks string) string {
	return `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[` + blocks +
		`]},{"role":"user","content":"more"}]}`
}

// A middle assistant turn that thought and then answered empty text is
// kept for the run path, with empty content and its reasoning, so the
// model sees its own thinking and the turns still alternate; the run input
// carries both. The tunnel's body leaves it out, as before (an assistant
// message of nothing is refused by OpenAI).
func TestEmptyTurnKeepsItsThinkingForARun(t *testing.T) {
	for _, blocks := range []string{
		`{"type":"thinking","thinking":"Hmm","signature":"s"},{"type":"text","text":""}`,
		`{"type":"text","text":""},{"type":"thinking","thinking":"Hmm"},{"type":"text","text":""}`,
		`{"type":"redacted_thinking","data":"x"},{"type":"thinking","thinking":"Hmm"},{"type":"text","text":""}`,
	} {
		r := mustParse(t, emptyTurnBody(blocks))
		chat, msgs := historyChat(t, emptyTurnBody(blocks))
		if len(msgs) != 3 || len(msgs[1]) != 3 || msgs[1]["role"] != "assistant" || msgs[1]["content"] != "" || msgs[1]["reasoning"] != "Hmm" {
			t.Errorf("%s: run body %s", blocks, chat)
			continue
		}
		req, err := openaiapi.ParseChat(chat)
		if err != nil {
			t.Fatalf("%s: ParseChat(%s): %v", blocks, chat, err)
		}
		in, err := req.RunInput()
		if err != nil {
			t.Fatal(err)
		}
		if m := in.GetMessages()[1]; m.GetRole() != iop.ChatRole_CHAT_ROLE_ASSISTANT || m.GetReasoning() != "Hmm" || len(m.GetToolCalls()) != 0 {
			t.Errorf("%s: run input message %v", blocks, m)
		}
		tunnel, err := r.TunnelChat(chat, ReasoningNone)
		if err != nil {
			t.Fatal(err)
		}
		if want := compact(t, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":"more"}],"max_tokens":8}`); string(tunnel) != want {
			t.Errorf("%s: tunnel body %s, want %s", blocks, tunnel, want)
		}
	}
}

// Without thinking text, or as the final turn (a prefill), an assistant
// turn of empty text adds nothing to either body, as before.
func TestEmptyTurnWithoutThinkingLeftOut(t *testing.T) {
	for _, body := range []string{
		emptyTurnBody(`{"type":"text","text":""}`),
		emptyTurnBody(`{"type":"thinking","thinking":""},{"type":"text","text":""}`),
		emptyTurnBody(`{"type":"redacted_thinking","data":"x"},{"type":"text","text":""}`),
		`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm"},{"type":"text","text":""}]}]}`,
	} {
		r := mustParse(t, body)
		chat, err := r.OpenAIChat()
		if err != nil {
			t.Fatal(err)
		}
		tunnel, err := r.TunnelChat(chat, ReasoningNone)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(chat), "assistant") || strings.Contains(string(chat), "reasoning") || string(tunnel) != string(chat) {
			t.Errorf("%s:\nrun %s\ntunnel %s", body, chat, tunnel)
		}
	}
}
