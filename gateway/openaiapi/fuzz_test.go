package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; the f.Add calls below
// add a few more inline so `go test` alone exercises the properties.

func FuzzParseTextToolCalls(f *testing.F) {
	for _, s := range streamSamples {
		f.Add(s, uint16(len(s)/2))
	}
	f.Add(`<tool_call>{"name":"lookup","arguments":{"a":"</tool_call>"}}</tool_call>`, uint16(3))
	f.Fuzz(func(t *testing.T, content string, split uint16) {
		rest, calls := ParseTextToolCalls(content, offered)
		if len(calls) == 0 && rest != content {
			t.Fatalf("no calls but content changed: %q → %q", content, rest)
		}
		if len(calls) > 0 {
			if len(rest) >= len(content) {
				t.Fatal("calls restored but nothing removed")
			}
			for _, c := range calls {
				if c.Type != "function" || !strings.HasPrefix(c.ID, "call_") || (c.Function.Name != "get_weather" && c.Function.Name != "lookup") {
					t.Fatalf("bad call %+v", c)
				}
			}
		}
		// Streaming, split at a (rune-aligned) point, renders the same as
		// non-stream, whether the mark comes first, last or never.
		if !utf8.ValidString(content) || content == "" {
			// An empty run is an upstream error (TestEmptyRunIsUpstreamError).
			return
		}
		i := int(split) % (len(content) + 1)
		for i > 0 && i < len(content) && !utf8.RuneStart(content[i]) {
			i--
		}
		// Also with parallel_tool_calls false and a named function
		// (RenderOptions narrowed to it): the same restoration both ways.
		for _, opts := range []RenderOptions{
			{Model: "m", ToolNames: offered},
			{Model: "m", ToolNames: offered, SingleToolCall: true},
			{Model: "m", ToolNames: offered[1:], SingleToolCall: true},
		} {
			for _, markAt := range []string{"start", "complete", "none"} {
				want := renderNonStream(t, opts, streamEvents([]string{content}, markAt))
				got := renderStream(t, opts, streamEvents([]string{content[:i], content[i:]}, markAt))
				if !equalRendered(got, want) {
					t.Fatalf("%v, %v: mark %s split %d of %q:\n got %+v\nwant %+v", opts.ToolNames, opts.SingleToolCall, markAt, i, content, got, want)
				}
				if opts.SingleToolCall && len(want.calls) > 1 {
					t.Fatalf("%d calls restored with parallel_tool_calls false", len(want.calls))
				}
			}
		}
	})
}

func FuzzRewriteModel(f *testing.F) {
	f.Add([]byte(`{"model":"a","messages":[{"role":"user","content":"hi"}]}`), "Qwen/Qwen2.5-7B-Instruct")
	f.Add([]byte(`{"\u006dodel":"a","model":1, "x":{"model":"n"}}`), "t")
	f.Add([]byte(" { } "), "")
	f.Add([]byte(`[1]`), "t")
	f.Fuzz(func(t *testing.T, body []byte, target string) {
		out, err := RewriteModel(body, target)
		in, err2 := withoutModel(body)
		isObject := json.Valid(body) && bytes.HasPrefix(bytes.TrimSpace(body), []byte("{"))
		if !isObject {
			if !errors.Is(err, ErrNotJSONObject) || !errors.Is(err2, ErrNotJSONObject) {
				t.Fatalf("non-object accepted: %v %v", err, err2)
			}
			return
		}
		if err != nil || err2 != nil {
			t.Fatalf("valid object refused: %v %v", err, err2)
		}
		if !json.Valid(out) || !json.Valid(in) {
			t.Fatalf("invalid output %q / %q", out, in)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := json.Unmarshal(m["model"], &got); err != nil {
			t.Fatalf("model not a string: %s", m["model"])
		}
		if utf8.ValidString(target) && got != target {
			t.Fatalf("model = %q, want %q", got, target)
		}
		// Only the model changed: without it, both bodies are identical.
		inOut, err := withoutModel(out)
		if err != nil || !bytes.Equal(inOut, in) {
			t.Fatalf("bytes beyond the model changed:\n%q\n%q", inOut, in)
		}
		var m2 map[string]json.RawMessage
		if err := json.Unmarshal(in, &m2); err != nil {
			t.Fatal(err)
		}
		if _, ok := m2["model"]; ok {
			t.Fatal("withoutModel kept a top-level model")
		}
	})
}

func FuzzParseChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f"}}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":1e2}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[{}]}],"tool_choice":{"type":"function","function":{"name":"f"}}}`))
	f.Add([]byte("{\"model\":\"\xff\"}"))
	f.Add([]byte("\f{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\u00a0"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseChat(body)
		checkParsed(t, body, nilIfNil(r), err, func() error { _, err := r.RunInput(); return err })
		if r == nil {
			return
		}
		if r.Model == "" || r.MessageCount < 1 || r.MessageCount > MaxMessages || r.EstimatePromptTokens() < 4 {
			t.Fatalf("inconsistent request %+v", r)
		}
		if _, err := RewriteModel(body, "t"); err != nil {
			t.Fatalf("parsed body not rewritable: %v", err)
		}
		if _, err := withoutModel(body); err != nil {
			t.Fatal(err)
		}
	})
}
