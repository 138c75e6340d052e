package gateway

import "testing"

// Once a Messages answer has begun, its call lets go of the whole prompt:
// the run rendering, the parsed chat and the Anthropic request a tunnel
// would have rendered its body from (a stream may hold its call for
// minutes).
func TestMessagesCallAnsweredLetsGoOfThePrompt(t *testing.T) {
	s := lazyBodyServer(t)
	k := lazyBodyCall(t, s, []byte(`{"model":"m","max_tokens":64,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"Hi"},`+
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Greet back.","signature":"s"},{"type":"text","text":"Hello!"}]},`+
		`{"role":"user","content":"More"}]}`))
	if k.messages == nil || k.parsed == nil || k.body == nil {
		t.Fatalf("call %+v", k)
	}
	k.answered()
	if k.messages != nil || k.parsed != nil || k.body != nil {
		t.Errorf("after answered: messages %v, parsed %v, body %d bytes", k.messages != nil, k.parsed != nil, len(k.body))
	}
}
