package openaiapi

import (
	"encoding/json"
	"strings"
	"testing"
)

var offered = []string{"get_weather", "lookup"}

func TestParseTextToolCalls(t *testing.T) {
	type call struct{ name, args string }
	cases := []struct {
		name    string
		content string
		rest    string
		calls   []call
	}{
		{"contract example",
			`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`,
			"", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"text kept around",
			"Let me check.\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>\nDone.",
			"Let me check.\n\nDone.", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"two calls whitespace only",
			"\n<tool_call> {\"name\":\"get_weather\",\"arguments\":{}} </tool_call>\n\n<tool_call>{\"name\":\"lookup\",\"arguments\":{\"q\":[1, 2]}}</tool_call>\n",
			"", []call{{"get_weather", `{}`}, {"lookup", `{"q":[1,2]}`}}},
		{"string arguments kept",
			`<tool_call>{"name":"lookup","arguments":"{\"q\": 1}"}</tool_call>`,
			"", []call{{"lookup", `{"q": 1}`}}},
		{"missing arguments", `<tool_call>{"name":"lookup"}</tool_call>`, "", []call{{"lookup", `{}`}}},
		{"null arguments", `<tool_call>{"name":"lookup","arguments":null}</tool_call>`, "", []call{{"lookup", `{}`}}},
		{"parameters alias", `<tool_call>{"name":"lookup","parameters":{"a":1}}</tool_call>`, "", []call{{"lookup", `{"a":1}`}}},
		{"key order and unicode kept",
			`<tool_call>{"name":"lookup","arguments":{"z":"é<&>","a":1.50}}</tool_call>`,
			"", []call{{"lookup", `{"z":"é<&>","a":1.50}`}}},
		{"unknown name stays",
			`a <tool_call>{"name":"rm_rf","arguments":{}}</tool_call> b`,
			`a <tool_call>{"name":"rm_rf","arguments":{}}</tool_call> b`, nil},
		{"invalid json stays, valid one restored",
			`<tool_call>{"name":"lookup",}</tool_call>x<tool_call>{"name":"lookup"}</tool_call>`,
			`<tool_call>{"name":"lookup",}</tool_call>x`, []call{{"lookup", `{}`}}},
		{"array arguments stay",
			`<tool_call>{"name":"lookup","arguments":[1]}</tool_call>`,
			`<tool_call>{"name":"lookup","arguments":[1]}</tool_call>`, nil},
		{"name not string stays",
			`<tool_call>{"name":1}</tool_call>`, `<tool_call>{"name":1}</tool_call>`, nil},
		{"not an object stays",
			`<tool_call>"lookup"</tool_call>`, `<tool_call>"lookup"</tool_call>`, nil},
		{"unclosed stays",
			`hi <tool_call>{"name":"lookup"}`, `hi <tool_call>{"name":"lookup"}`, nil},
		{"nested open: first close ends the block",
			`<tool_call>x<tool_call>{"name":"lookup"}</tool_call>tail`,
			`<tool_call>x<tool_call>{"name":"lookup"}</tool_call>tail`, nil},
		{"angle brackets around",
			`<<tool_call>{"name":"lookup"}</tool_call>>`, `<>`, []call{{"lookup", `{}`}}},
		{"no blocks: unchanged, even whitespace", "  \n", "  \n", nil},
		{"whitespace with no call stays", "  <tool_call>bad</tool_call> ", "  <tool_call>bad</tool_call> ", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rest, calls := ParseTextToolCalls(tc.content, offered)
			if rest != tc.rest {
				t.Fatalf("rest = %q, want %q", rest, tc.rest)
			}
			if len(calls) != len(tc.calls) {
				t.Fatalf("calls = %+v, want %+v", calls, tc.calls)
			}
			for i, c := range calls {
				if c.Function.Name != tc.calls[i].name || c.Function.Arguments != tc.calls[i].args || c.Type != "function" {
					t.Fatalf("call %d = %+v, want %+v", i, c, tc.calls[i])
				}
				if !strings.HasPrefix(c.ID, "call_") || len(c.ID) != 29 || strings.Trim(c.ID[5:], alnum) != "" {
					t.Fatalf("bad id %q", c.ID)
				}
			}
		})
	}
	if rest, calls := ParseTextToolCalls(`<tool_call>{"name":"lookup"}</tool_call>`, nil); calls != nil || rest == "" {
		t.Fatal("no offered tools must restore nothing")
	}
}

func TestToolCallIDsUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := newToolCallID()
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

func TestParseNativeToolCalls(t *testing.T) {
	calls, err := parseNativeToolCalls(`[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"function":{"name":"g","arguments":{"b": 2}}}]`)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[0].Function.Arguments != `{"a":1}` {
		t.Fatalf("%+v", calls)
	}
	if calls[1].Type != "function" || !strings.HasPrefix(calls[1].ID, "call_") || calls[1].Function.Arguments != `{"b":2}` {
		t.Fatalf("defaults not applied: %+v", calls[1])
	}
	for _, bad := range []string{`{}`, `[{"function":{}}]`, `[{"function":{"name":"f","arguments":[1]}}]`, `not json`} {
		if _, err := parseNativeToolCalls(bad); err == nil {
			t.Errorf("%s: want error", bad)
		}
	}
	if calls, err := parseNativeToolCalls(" "); err != nil || calls != nil {
		t.Fatal("blank metadata means no calls")
	}
}

func TestPartialPrefixLen(t *testing.T) {
	cases := map[string]int{"": 0, "abc": 0, "<": 1, "a<t": 2, "<tool_": 6, "<tool_call": 10, "<tool_call>": 0, "<tool_x": 0, "<<": 1}
	for s, want := range cases {
		if got := partialPrefixLen(s, toolOpenTag); got != want {
			t.Errorf("partialPrefixLen(%q) = %d, want %d", s, got, want)
		}
	}
}

// scanPieces runs the incremental scanner over pieces and returns the
// segments' text, with calls rendered as a marker plus their arguments.
func scanPieces(pieces []string) string {
	s := textToolScanner{offered: offeredSet(offered)}
	var b strings.Builder
	emit := func(seg segment) {
		if seg.call != nil {
			b.WriteString("{CALL " + seg.call.Function.Name + " " + seg.call.Function.Arguments + "}")
			return
		}
		b.WriteString(seg.text)
	}
	for _, p := range pieces {
		s.feed(p, emit)
	}
	s.finish(emit)
	return b.String()
}

// The scanner's segmentation must not depend on how the content is split.
func TestScannerSplitInvariance(t *testing.T) {
	for _, content := range streamSamples {
		want := scanPieces([]string{content})
		for i := 0; i <= len(content); i++ {
			for j := i; j <= len(content); j++ {
				if got := scanPieces([]string{content[:i], content[i:j], content[j:]}); got != want {
					t.Fatalf("split %d/%d of %q:\n got %q\nwant %q", i, j, content, got, want)
				}
			}
		}
	}
}

func TestArgumentsStringCompacts(t *testing.T) {
	got, ok := argumentsString(json.RawMessage("{ \"a\" : [ 1 , 2 ] }"), true)
	if !ok || got != `{"a":[1,2]}` {
		t.Fatalf("%q %v", got, ok)
	}
}
