package anthropicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// decodeValue decodes b as encoding/json does (the last of repeated
// members kept, invalid UTF-8 and lone surrogates as U+FFFD), numbers kept
// as their literal text.
func decodeValue(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// wantTemplateOff is the model of WithTemplateThinkingOff on the decoded
// body: its chat_template_kwargs an object with enable_thinking false,
// the other arguments of an object kept, anything else replaced.
func wantTemplateOff(in map[string]any) map[string]any {
	out := make(map[string]any, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	kw := map[string]any{}
	if had, ok := in["chat_template_kwargs"].(map[string]any); ok {
		for k, v := range had {
			kw[k] = v
		}
	}
	kw["enable_thinking"] = false
	out["chat_template_kwargs"] = kw
	return out
}

// Decoded as encoding/json decodes it, the body WithTemplateThinkingOff
// returns is the body it was given with thinking turned off in its
// chat_template_kwargs, and nothing else changed: arguments whose encoding
// changes when re-encoded (HTML characters, U+2028, escapes, big numbers)
// keep their values.
func TestWithTemplateThinkingOffKeepsDecodedValues(t *testing.T) {
	for _, in := range []string{
		`{"chat_template_kwargs":{"a":"<b>&amp;</b>","b":"\u2028","c":"\u0041","d":1e400,"e":-0}}`,
		`{"m":"<&>","chat_template_kwargs":{"x":{"y":["<",1.50]}},"n":"\u00e9"}`,
		"{\"chat_template_kwargs\":{\"s\":\"\xff\",\"\\ud800\":1}}",
	} {
		out, err := WithTemplateThinkingOff([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		checkTemplateOffDecoded(t, []byte(in), out)
		checkTemplateOff(t, []byte(in), out)
	}
}

func checkTemplateOffDecoded(t *testing.T, in, out []byte) {
	t.Helper()
	before, err := decodeValue(in)
	if err != nil {
		t.Fatalf("input %q: %v", in, err)
	}
	after, err := decodeValue(out)
	if err != nil || !json.Valid(out) {
		t.Fatalf("%q -> invalid JSON %q: %v", in, out, err)
	}
	if want := wantTemplateOff(before.(map[string]any)); !reflect.DeepEqual(after, want) {
		t.Fatalf("%q ->\n%q\ndecodes to %v\nwant       %v", in, out, after, want)
	}
}

// Whatever a client sent, WithTemplateThinkingOff accepts exactly the JSON
// objects with members that encoding/json accepts, and its output decodes
// to the input's decoding with the kwarg set.
func FuzzWithTemplateThinkingOffDecoded(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"<hi>"}]}`,
		`{"chat_template_kwargs":{"a":"<&>","b":1e400}}`, `{"chat_template_kwargs":[1],"a":{}}`,
		`{"chat\u005ftemplate_kwargs":{"enable_thinking":true},"chat_template_kwargs":{"x":"\u2028"}}`,
		"{\"chat_template_kwargs\":{\"\xff\":1,\"\xfe\":2}}", `{"a":-0,"b":[]}`, `{}`, `[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, chat []byte) {
		out, err := WithTemplateThinkingOff(chat)
		v, derr := decodeValue(chat)
		obj, isObj := v.(map[string]any)
		accept := json.Valid(chat) && derr == nil && isObj && len(obj) > 0
		if err != nil {
			if !errors.Is(err, ErrNotChatBody) || out != nil {
				t.Fatalf("%q: %q, %v", chat, out, err)
			}
			if accept {
				t.Fatalf("refused %q: %v", chat, err)
			}
			return
		}
		if !accept {
			t.Fatalf("accepted %q -> %q", chat, out)
		}
		checkTemplateOffDecoded(t, chat, out)
	})
}
