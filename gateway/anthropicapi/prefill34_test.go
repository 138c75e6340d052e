package anthropicapi

import (
	"encoding/json"
	"net/http"
	"testing"
)

// A final assistant message with text and no tool call is a prefill; an
// empty one, one of tool calls, or a final user message is not. With
// thinking enabled (any type that thinks) a prefill is a 400, as
// Anthropic's API refuses it; thinking disabled takes it.
func TestParsePrefill(t *testing.T) {
	for _, c := range []struct {
		last    string
		prefill bool
	}{
		{`{"role":"assistant","content":"{\""}`, true},
		{`{"role":"assistant","content":[{"type":"text","text":""},{"type":"text","text":"Once"}]}`, true},
		{`{"role":"assistant","content":""}`, false},
		{`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]}`, false},
		{`{"role":"user","content":"more"}`, false},
	} {
		body := `{"model":"m","max_tokens":8,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"x"},` + c.last + `]}`
		r, e := ParseRequest([]byte(body))
		if e != nil || r.Prefill != c.prefill {
			t.Errorf("%s: %+v %v", c.last, e, r)
		}
		for _, thinking := range []string{`{"type":"enabled","budget_tokens":1024}`, `{"type":"adaptive"}`, `{"type":"disabled"}`} {
			withThinking := body[:len(body)-1] + `,"thinking":` + thinking + `}`
			_, e := ParseRequest([]byte(withThinking))
			refused := c.prefill && thinking != `{"type":"disabled"}`
			if (e != nil) != refused || (e != nil && (e.Status != http.StatusBadRequest || e.Type != TypeInvalidRequest)) {
				t.Errorf("%s with thinking %s: %+v", c.last, thinking, e)
			}
		}
	}
}

// The run rendering of a prefill carries no server's members; its tunnel
// rendering for vLLM carries vLLM's continuation, and a rendering for any
// other server, made from vLLM's (a failover), carries none again.
func TestPrefillTunnelChat(t *testing.T) {
	r, e := ParseRequest([]byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"{\""}]}`))
	if e != nil {
		t.Fatal(e)
	}
	members := func(b []byte) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return m
	}
	run, err := r.OpenAIChat()
	if err != nil {
		t.Fatal(err)
	}
	if m := members(run); m["continue_final_message"] != nil || m["add_generation_prompt"] != nil || r.ChatMember() != ReasoningRun {
		t.Errorf("run rendering %s, member %q", run, r.ChatMember())
	}
	vllm, err := r.TunnelChat(run, ReasoningVLLM)
	if err != nil {
		t.Fatal(err)
	}
	if m := members(vllm); string(m["continue_final_message"]) != "true" || string(m["add_generation_prompt"]) != "false" {
		t.Errorf("vllm rendering %s", vllm)
	}
	for _, member := range []ReasoningMember{ReasoningContent, ReasoningNone} {
		b, err := r.TunnelChat(vllm, member)
		if err != nil {
			t.Fatal(err)
		}
		if m := members(b); m["continue_final_message"] != nil || m["add_generation_prompt"] != nil {
			t.Errorf("%q rendering %s", member, b)
		}
	}
	plain, _ := ParseRequest([]byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"x"}]}`))
	if plain.Prefill || plain.ChatMember() != ReasoningVLLM {
		t.Errorf("no prefill: %v %q", plain.Prefill, plain.ChatMember())
	}
}
