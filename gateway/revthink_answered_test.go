package gateway

import (
	"bytes"
	"testing"
)

// Once the answer has begun, a call lets go of the prefix_affinity
// rendering its acquire kept for failover too: after a tunnel was chosen
// for a conversation with earlier thinking it is a second whole prompt
// (the run rendering), besides the tunnel's body, that a stream would
// otherwise hold for minutes.
func TestAnsweredLetsGoOfAffinityPrompt(t *testing.T) {
	s := lazyBodyServer(t)
	k := lazyBodyCall(t, s, []byte(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"},`+
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Greet back.","signature":"s"},{"type":"text","text":"Hello!"}]},`+
		`{"role":"user","content":"More"}]}`))
	k.prompt = k.body                // as acquire keeps it (the run rendering)
	k.providerType = "openai_compat" // a tunnel that gets no reasoning: its own rendering
	if _, err := k.tunnelBody(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(k.prompt, k.body) {
		t.Fatalf("the tunnel's body is the run rendering; want the prompt held apart")
	}
	k.answered()
	if k.prompt != nil || k.body != nil {
		t.Errorf("after answered: prompt %d bytes, body %d bytes", len(k.prompt), len(k.body))
	}
}
