package anthropicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
)

// checkTemplateOff checks out is what WithTemplateThinkingOff must make of
// in (a valid JSON object with members): valid JSON whose last
// chat_template_kwargs is an object with enable_thinking false, the input's
// other kwargs (when its last chat_template_kwargs was an object) and every
// other member unchanged, as a decoder that keeps the last of repeated
// members reads them (Python's json in vLLM, Go's).
func checkTemplateOff(t testing.TB, in, out []byte) {
	t.Helper()
	var before, after map[string]json.RawMessage
	if err := json.Unmarshal(in, &before); err != nil {
		t.Fatalf("input %q: %v", in, err)
	}
	if !json.Valid(out) || json.Unmarshal(out, &after) != nil {
		t.Fatalf("%q -> invalid JSON %q", in, out)
	}
	var kw map[string]json.RawMessage
	if err := json.Unmarshal(after["chat_template_kwargs"], &kw); err != nil || kw == nil || string(kw["enable_thinking"]) != "false" {
		t.Fatalf("%q -> chat_template_kwargs %s", in, after["chat_template_kwargs"])
	}
	var had map[string]json.RawMessage
	if raw := bytes.TrimSpace(before["chat_template_kwargs"]); len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &had); err != nil {
			t.Fatal(err)
		}
	}
	delete(kw, "enable_thinking")
	delete(had, "enable_thinking")
	if !maps.EqualFunc(kw, had, jsonEqual) {
		t.Fatalf("%q -> kwargs %s lost or changed arguments", in, after["chat_template_kwargs"])
	}
	delete(before, "chat_template_kwargs")
	delete(after, "chat_template_kwargs")
	if !maps.EqualFunc(before, after, jsonEqual) {
		t.Fatalf("%q -> %q: members changed", in, out)
	}
}

// jsonEqual compares two JSON values as encoding/json decodes them
// (numbers by their text): re-encoding may spell a string differently
// ("<" as "\u003c") without changing it.
func jsonEqual(a, b json.RawMessage) bool {
	va, ea := decodeValue(a)
	vb, eb := decodeValue(b)
	return ea == nil && eb == nil && reflect.DeepEqual(va, vb)
}

// Any valid JSON object with members gets thinking turned off: whitespace
// anywhere (a body a client or another encoder wrote, a trailing newline),
// an existing chat_template_kwargs merged (its enable_thinking replaced, its
// other arguments kept), a non-object one replaced, an escaped key name
// recognised, the last of repeated members changed, and braces or quotes
// inside strings not mistaken for structure. The body's bytes before the
// change are copied as they are.
func TestWithTemplateThinkingOffAnyObject(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"m","stream":false}`:      `{"model":"m","stream":false,"chat_template_kwargs":{"enable_thinking":false}}`,
		"{\"model\":\"m\"}\n":               "{\"model\":\"m\",\"chat_template_kwargs\":{\"enable_thinking\":false}}\n",
		" \t{ \"model\" : \"m\" }\r\n":      " \t{ \"model\" : \"m\" ,\"chat_template_kwargs\":{\"enable_thinking\":false}}\r\n",
		`{"a":"} \" \\","b":[{"c":"]"}]}`:   `{"a":"} \" \\","b":[{"c":"]"}],"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"a":-1.5e3,"b":true,"c":null}`:    `{"a":-1.5e3,"b":true,"c":null,"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"m":1,"chat_template_kwargs":{}}`: `{"m":1,"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"chat_template_kwargs" : { "enable_thinking" : true, "x" : [1] } , "m":1}`: `{"chat_template_kwargs" : {"enable_thinking":false,"x":[1]} , "m":1}`,
		`{"chat_template_kwargs":null,"m":1}`:                                        `{"chat_template_kwargs":{"enable_thinking":false},"m":1}`,
		`{"chat_template_kwargs":"x"}`:                                               `{"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"chat\u005ftemplate_kwargs":{"y":2}}`:                                      `{"chat\u005ftemplate_kwargs":{"enable_thinking":false,"y":2}}`,
		`{"chat_template_kwargs":{"a":1},"chat_template_kwargs":{"b":2}}`:            `{"chat_template_kwargs":{"a":1},"chat_template_kwargs":{"b":2,"enable_thinking":false}}`,
		`{"x":"chat_template_kwargs","chat_template_kwargsx":1}`:                     `{"x":"chat_template_kwargs","chat_template_kwargsx":1,"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"\\":"\\\\","q\"":"\"}"}`:                                                  `{"\\":"\\\\","q\"":"\"}","chat_template_kwargs":{"enable_thinking":false}}`,
		`{"nested":{"chat_template_kwargs":{"enable_thinking":true}}}`:               `{"nested":{"chat_template_kwargs":{"enable_thinking":true}},"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"chat_template_kwargs":{"enable_thinking":false,"enable_thinking":true}}`:  `{"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"s":"` + strings.Repeat(`\\`, 7) + `\"}"}`:                                 `{"s":"` + strings.Repeat(`\\`, 7) + `\"}","chat_template_kwargs":{"enable_thinking":false}}`,
	} {
		chat := []byte(in)
		out, err := WithTemplateThinkingOff(chat)
		if err != nil || string(out) != want {
			t.Errorf("%q:\n got %q, %v\nwant %q", in, out, err, want)
			continue
		}
		if string(chat) != in {
			t.Errorf("%q: input written to", in)
		}
		checkTemplateOff(t, chat, out)
	}
	for _, bad := range []string{``, ` `, `{}`, "{ \n}", `[]`, `[{"a":1}]`, `"{}"`, `null`, `1`, `{"a":1}x`, `{"a":1}{"b":2}`,
		`{"a":}`, `{"a":1,}`, `{a:1}`, `{"a":1`, `{"a":"}`, "{\"a\":1}\x00"} {
		if out, err := WithTemplateThinkingOff([]byte(bad)); !errors.Is(err, ErrNotChatBody) || out != nil {
			t.Errorf("%q: %q, %v; want ErrNotChatBody", bad, out, err)
		}
	}
}

// Whatever a client sent, WithTemplateThinkingOff never panics, never
// writes into its input, and either returns valid JSON with the kwarg set
// (checkTemplateOff) or ErrNotChatBody for what is not a JSON object with
// members.
func FuzzWithTemplateThinkingOffAnyBody(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, " {\"a\" : [1, {\"b\":\"}\"}] }\n",
		`{"chat_template_kwargs":{"x":1}}`, `{"chat_template_kwargs":[1],"a":{}}`, `{"chat\u005ftemplate_kwargs":{}}`,
		`{"a":"\\\""}`, `{}`, `{ }`, `[1]`, `}{`, `{`, ``, `{"a":1}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, chat []byte) {
		in := bytes.Clone(chat)
		chat = append(chat[:len(chat):len(chat)], make([]byte, 64)...)[:len(chat)]
		out, err := WithTemplateThinkingOff(chat)
		if !bytes.Equal(chat, in) || !bytes.Equal(chat[:cap(chat)][len(chat):], make([]byte, cap(chat)-len(chat))) {
			t.Fatalf("the input was written to")
		}
		var obj map[string]json.RawMessage
		object := json.Valid(in) && json.Unmarshal(in, &obj) == nil && obj != nil && len(obj) > 0
		if err != nil {
			if !errors.Is(err, ErrNotChatBody) || out != nil {
				t.Fatalf("%q: %q, %v", in, out, err)
			}
			if object {
				t.Fatalf("refused %q", in)
			}
			return
		}
		if !object {
			t.Fatalf("accepted %q -> %q", in, out)
		}
		checkTemplateOff(t, in, out)
	})
}

// benchChatBody is a tunnel body as OpenAIChat renders an agent's
// conversation: a long system prompt, eight turns, tools.
func benchChatBody() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[{"role":"system","content":"You are an agent. ` + strings.Repeat("Follow the rules. ", 400) + `"}`)
	for i := range 8 {
		b.WriteString(`,{"role":"user","content":"` + strings.Repeat(`Edit the file \"a.go\" {line `+string(rune('0'+i))+`}. `, 200) + `"}`)
		b.WriteString(`,{"role":"assistant","content":"` + strings.Repeat("Done; next. ", 300) + `"}`)
	}
	b.WriteString(`],"max_tokens":32000,"stream":true,"stream_options":{"include_usage":true},"tools":[`)
	for i := range 16 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"function","function":{"name":"tool` + string(rune('a'+i)) + `","description":"` + strings.Repeat("does things ", 20) +
			`","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkWithTemplateThinkingOff: one tunnel attempt's body to vLLM with
// thinking off (about 200 KiB).
func BenchmarkWithTemplateThinkingOff(b *testing.B) {
	chat := benchChatBody()
	b.SetBytes(int64(len(chat)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := WithTemplateThinkingOff(chat); err != nil {
			b.Fatal(err)
		}
	}
}

// The body is validated as json.Valid validates it, nesting bound
// included: what encoding/json refuses is refused, what it accepts is
// accepted, at the bound and around it, and for numbers, escapes and
// literals at their edges.
func TestWithTemplateThinkingOffValidatesAsEncodingJSON(t *testing.T) {
	var cases []string
	for _, depth := range []int{9998, 9999, 10000} {
		cases = append(cases, `{"a":`+strings.Repeat("[", depth)+strings.Repeat("]", depth)+`}`,
			`{"a":`+strings.Repeat(`{"b":`, depth)+"1"+strings.Repeat("}", depth)+`}`)
	}
	for _, v := range []string{`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-01`, `+1`, `1.5e3.2`,
		`"\u00e9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, `"\/"`, "\"\t\"", "\"\x7f\"", "\"\xff\"", `tru`, `truex`, `nul`, `[1,]`, `[,1]`, `[1 2]`,
		`{"a" 1}`, `{"a":1 "b":2}`, `{1:2}`, `[]`, `{}`, `[[]]`, "[\n]", `"\"`} {
		cases = append(cases, `{"v":`+v+`}`)
	}
	for _, in := range cases {
		_, err := WithTemplateThinkingOff([]byte(in))
		if want := json.Valid([]byte(in)); (err == nil) != want {
			t.Errorf("%.60q: error %v, json.Valid %v", in, err, want)
		}
	}
}

// Strings are read eight bytes at a time: a quote, a backslash or a
// control character at any offset of a word, and bytes just beside the
// special ranges (0x1f, 0x20, 0x5b, 0x7f, 0x80, 0xff), are found as
// json.Valid finds them.
func TestWithTemplateThinkingOffStringWords(t *testing.T) {
	for _, special := range []string{`\"`, `\\`, `\u0041`, `\n`, "\x00", "\x01", "\x1f", "\x20", "\x21", "\x5b", "\x5d", "\x7f", "\x80", "\xff", `"`, `\`} {
		for pos := range 20 {
			for tail := range 10 {
				s := strings.Repeat("a", pos) + special + strings.Repeat("b", tail)
				in := []byte(`{"s":"` + s + `","t":1}`)
				out, err := WithTemplateThinkingOff(in)
				if want := json.Valid(in); (err == nil) != want {
					t.Fatalf("%q: error %v, json.Valid %v", in, err, want)
				}
				if err == nil {
					checkTemplateOff(t, in, out)
				}
			}
		}
	}
}
