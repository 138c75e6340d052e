package anthropicapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// historyChat renders body as the OpenAI chat body the edge sends on and
// returns it with its messages decoded.
func historyChat(t *testing.T, body string) ([]byte, []map[string]any) {
	t.Helper()
	chat, err := mustParse(t, body).OpenAIChat()
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(chat, &out); err != nil {
		t.Fatalf("%s: %v", chat, err)
	}
	return chat, out.Messages
}

const historyThinkingBody = `{"model":"m","max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[
	{"role":"user","content":"weather in Paris?"},
	{"role":"assistant","content":[
		{"type":"thinking","thinking":"The user wants weather.","signature":"EqQBCkYIBxgCKkB"},
		{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},
		{"type":"thinking","thinking":" Call the tool.","signature":""},
		{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
	{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"}]},
	{"role":"assistant","content":[{"type":"thinking","thinking":"Report it."},{"type":"text","text":"It is 18C."}]},
	{"role":"user","content":"thanks"}]}`

// Thinking blocks an agent sends back become the assistant turn's
// reasoning, in order (redacted thinking, Anthropic's ciphertext, is
// dropped), under "reasoning" only: the name the run path reads (and
// vLLM's chat messages take). The tunnel's body (TunnelChat) leaves it out.
func TestHistoryThinkingBecomesReasoning(t *testing.T) {
	chat, msgs := historyChat(t, historyThinkingBody)
	if len(msgs) != 5 {
		t.Fatalf("messages: %s", chat)
	}
	if msgs[1]["reasoning"] != "The user wants weather. Call the tool." || msgs[1]["content"] != nil {
		t.Errorf("first assistant turn: %v", msgs[1])
	}
	if msgs[3]["reasoning"] != "Report it." || msgs[3]["content"] != "It is 18C." {
		t.Errorf("second assistant turn: %v", msgs[3])
	}
	for i, m := range msgs {
		if _, ok := m["reasoning"]; ok != (i == 1 || i == 3) {
			t.Errorf("messages[%d] reasoning: %v", i, m)
		}
	}
	if strings.Contains(string(chat), "reasoning_content") || strings.Contains(string(chat), "EmwKAhgBEgy3va3pzix") || strings.Contains(string(chat), "signature") {
		t.Errorf("body carries more than the reasoning: %s", chat)
	}

	// The edge's run path reads the body it made: the reasoning reaches
	// the run input of each assistant message.
	req, err := openaiapi.ParseChat(chat)
	if err != nil {
		t.Fatalf("ParseChat(%s): %v", chat, err)
	}
	in, err := req.RunInput()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range in.GetMessages() {
		if m.GetRole() == iop.ChatRole_CHAT_ROLE_ASSISTANT {
			got = append(got, m.GetReasoning())
		}
	}
	if strings.Join(got, "|") != "The user wants weather. Call the tool.|Report it." {
		t.Errorf("run input reasoning: %q", got)
	}
}

// A turn without thinking text keeps the body it always had: no reasoning
// member for an empty, absent or null thinking. A turn of thinking alone is
// still refused as empty in the middle of a conversation, and left out as
// a final prefill.
func TestHistoryThinkingWithoutTextOmitted(t *testing.T) {
	for _, blocks := range []string{
		`{"type":"thinking","thinking":"","signature":"s"},{"type":"text","text":"Hi."}`,
		`{"type":"thinking","signature":"s"},{"type":"text","text":"Hi."}`,
		`{"type":"thinking","thinking":null},{"type":"text","text":"Hi."}`,
		`{"type":"redacted_thinking","data":"x"},{"type":"text","text":"Hi."}`,
	} {
		chat, msgs := historyChat(t, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[`+blocks+`]},{"role":"user","content":"more"}]}`)
		if len(msgs) != 3 || msgs[1]["content"] != "Hi." || strings.Contains(string(chat), "reasoning") {
			t.Errorf("%s: %s", blocks, chat)
		}
	}
	if _, e := ParseRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm"}]},{"role":"user","content":"more"}]}`)); e == nil || !strings.Contains(e.Message, "messages.1.content: must not be empty") {
		t.Errorf("thinking-only turn: %v", e)
	}
	chat, msgs := historyChat(t, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm"}]}]}`)
	if len(msgs) != 1 || strings.Contains(string(chat), "Hmm") {
		t.Errorf("thinking-only prefill: %s", chat)
	}
}

// A thinking block's thinking must be a string: anything else is a 400
// naming it, as Anthropic answers; thinking blocks stay refused outside
// assistant turns.
func TestHistoryThinkingNotAStringRefused(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{`{"role":"assistant","content":[{"type":"thinking","thinking":3},{"type":"text","text":"x"}]}`, "messages.1.content.0.thinking: expected a string"},
		{`{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"thinking","thinking":{"t":"x"}}]}`, "messages.1.content.1.thinking: expected a string"},
		{`{"role":"user","content":[{"type":"thinking","thinking":"x"}]}`, "thinking blocks are only allowed in assistant messages"},
	} {
		_, e := ParseRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},` + c.msg + `]}`))
		if e == nil || e.Status != 400 || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: %v, want %q", c.msg, e, c.want)
		}
	}
}

// Earlier thinking counts toward neither estimate (count_tokens, and the
// chat body's that fills message_start), as Anthropic leaves earlier
// turns' thinking out of the context it counts.
func TestHistoryThinkingNotCounted(t *testing.T) {
	without := strings.NewReplacer(
		`{"type":"thinking","thinking":"The user wants weather.","signature":"EqQBCkYIBxgCKkB"},`, ``,
		`{"type":"thinking","thinking":" Call the tool.","signature":""},`, ``,
		`{"type":"thinking","thinking":"Report it."},`, ``).Replace(historyThinkingBody)
	if without == historyThinkingBody {
		t.Fatal("no thinking removed")
	}
	a, b := mustParse(t, historyThinkingBody), mustParse(t, without)
	if CountTokens(a) != CountTokens(b) {
		t.Errorf("count_tokens %d with thinking, %d without", CountTokens(a), CountTokens(b))
	}
	ca, _ := a.OpenAIChat()
	cb, _ := b.OpenAIChat()
	ra, err := openaiapi.ParseChat(ca)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := openaiapi.ParseChat(cb)
	if err != nil {
		t.Fatal(err)
	}
	if ra.EstimatePromptTokens() != rb.EstimatePromptTokens() {
		t.Errorf("chat estimate %d with thinking, %d without", ra.EstimatePromptTokens(), rb.EstimatePromptTokens())
	}
}

// The body a tunnel sends (TunnelChat) is the run body without reasoning
// when a turn carries thinking, and the run body itself when none does.
func TestTunnelChatLeavesReasoningOut(t *testing.T) {
	r := mustParse(t, historyThinkingBody)
	run, tunnel := runAndTunnelChat(t, r)
	if strings.Contains(string(tunnel), "reasoning") || strings.Contains(string(tunnel), "Report it.") {
		t.Errorf("tunnel body carries reasoning: %s", tunnel)
	}
	var a, b map[string]any
	if json.Unmarshal(run, &a) != nil || json.Unmarshal(tunnel, &b) != nil {
		t.Fatalf("bodies %s / %s", run, tunnel)
	}
	for _, m := range a["messages"].([]any) {
		delete(m.(map[string]any), "reasoning")
	}
	if ra, rb := mustJSON(t, a), mustJSON(t, b); ra != rb {
		t.Errorf("tunnel body differs beyond reasoning:\n%s\n%s", ra, rb)
	}

	plain := mustParse(t, `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":""},{"type":"text","text":"yo"}]},{"role":"user","content":"bye"}]}`)
	if run, tunnel = runAndTunnelChat(t, plain); &tunnel[0] != &run[0] {
		t.Errorf("a body without reasoning was rendered again")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
