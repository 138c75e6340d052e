package anthropicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"testing"
)

// WithTemplateThinkingOff never panics and never writes into its input
// (the call's body, sent as it is to a later attempt's provider). A body
// as the edge renders it (a compact JSON object with members) comes back
// valid JSON with the same members and chat_template_kwargs turning
// thinking off; anything it refuses is ErrNotChatBody, and an object it
// refuses has no members.
func FuzzWithTemplateThinkingOff(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"}"}],"stream":true,"stream_options":{"include_usage":true}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"a":{}}`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`}{`))
	f.Add([]byte(`{`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, chat []byte) {
		in := bytes.Clone(chat)
		// Spare capacity behind the body, as json.Marshal's output often
		// has: an in-place append would write into it unseen.
		chat = append(chat[:len(chat):len(chat)], make([]byte, 64)...)[:len(chat)]
		out, err := WithTemplateThinkingOff(chat)
		if !bytes.Equal(chat, in) || !bytes.Equal(chat[:cap(chat)][len(chat):], make([]byte, cap(chat)-len(chat))) {
			t.Fatalf("the input was written to")
		}
		if err == nil && len(out) > 0 && len(chat) > 0 && &out[0] == &chat[0] {
			t.Fatalf("the output shares the input's array")
		}
		var obj map[string]json.RawMessage
		compact := new(bytes.Buffer)
		rendered := json.Unmarshal(in, &obj) == nil && obj != nil && json.Compact(compact, in) == nil && bytes.Equal(compact.Bytes(), in)
		if err != nil {
			if !errors.Is(err, ErrNotChatBody) {
				t.Fatalf("error %v is not ErrNotChatBody", err)
			}
			if rendered && len(obj) > 0 {
				t.Fatalf("refused %s", in)
			}
			return
		}
		if !rendered {
			return // not a body the edge renders: only the above holds
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s -> %s: %v", in, out, err)
		}
		// A chat_template_kwargs object the body had keeps its other
		// arguments (FuzzWithTemplateThinkingOffAnyBody checks them).
		var kw map[string]json.RawMessage
		if json.Unmarshal(got["chat_template_kwargs"], &kw) != nil || string(kw["enable_thinking"]) != "false" {
			t.Fatalf("%s -> chat_template_kwargs %s", in, got["chat_template_kwargs"])
		}
		delete(got, "chat_template_kwargs")
		delete(obj, "chat_template_kwargs")
		if !maps.EqualFunc(got, obj, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("%s -> %s: members changed", in, out)
		}
	})
}

// The member is added last, after the body's own members byte for byte,
// and an empty object or what is not an object is refused.
func TestWithTemplateThinkingOffShape(t *testing.T) {
	out, err := WithTemplateThinkingOff([]byte(`{"model":"m","stream":false}`))
	if err != nil || string(out) != `{"model":"m","stream":false,"chat_template_kwargs":{"enable_thinking":false}}` {
		t.Fatalf("%s, %v", out, err)
	}
	for _, bad := range []string{``, `{`, `}`, `{}`, `[]`, `"{}"`, `null`, `{"a":1}x`} {
		if out, err := WithTemplateThinkingOff([]byte(bad)); !errors.Is(err, ErrNotChatBody) || out != nil {
			t.Errorf("%q: %s, %v; want ErrNotChatBody", bad, out, err)
		}
	}
}

// A thinking.type that is not a string is refused as a type mismatch,
// like every other field, not as an unknown name.
func TestThinkingTypeNotStringRefused(t *testing.T) {
	_, e := ParseRequest([]byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":1}}`))
	if e == nil || e.Status != 400 || e.Message != "thinking.type: expected a string" {
		t.Fatalf("%+v, want a 400 thinking.type: expected a string", e)
	}
}
