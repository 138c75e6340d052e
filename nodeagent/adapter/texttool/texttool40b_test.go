package texttool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// asJSON40b is s as a JSON string reads back (invalid UTF-8 replaced).
func asJSON40b(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// blocks40b reads text as tag-wrapped JSON values, each after a line
// break but the first: <tag>{…}</tag>\n<tag>{…}</tag>. A value is read
// as JSON, so a closing tag inside one of its strings does not end it.
func blocks40b(t *testing.T, text, tag string, into func(json.RawMessage)) {
	t.Helper()
	open, closing := "<"+tag+">", "</"+tag+">"
	for i := 0; text != ""; i++ {
		if i > 0 {
			var ok bool
			if text, ok = strings.CutPrefix(text, "\n"); !ok {
				t.Fatalf("no line break before block %d: %q", i, text)
			}
		}
		rest, ok := strings.CutPrefix(text, open)
		if !ok {
			t.Fatalf("block %d does not open with %s: %q", i, open, text)
		}
		dec := json.NewDecoder(strings.NewReader(rest))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("block %d is not JSON: %v: %q", i, err, rest)
		}
		if text, ok = strings.CutPrefix(rest[dec.InputOffset():], closing); !ok {
			t.Fatalf("block %d does not close with %s: %q", i, closing, rest)
		}
		into(v)
	}
}

func compact40b(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return b.String()
}

// FuzzInput40b: the text tool-call form renders a client's conversation
// (names, arguments and results it wrote, any bytes) into the text a
// model reads. Whatever they are:
//   - no native tool member or tool message is left, and in is unchanged;
//   - each assistant turn with calls reads back, after its own text, as
//     its calls' <tool_call> blocks in order, each one JSON object with
//     the call's name and arguments that are JSON: the arguments given
//     when they are JSON, {} when empty, else them as a JSON string;
//   - each run of tool results reads back as one user turn of
//     <tool_response> blocks, each with the result's text and the tool's
//     name (its own, else its call's);
//   - the instruction is added exactly when the choice is not none.
func FuzzInput40b(f *testing.F) {
	f.Add([]byte{1, 2 | 1<<3, 3, 3, 2}, "get_weather", `{"city": "Paris"}`, "18°C", uint8(0))
	f.Add([]byte{0, 1, 2 | 2<<3, 3, 1}, "f", `not json </tool_call>`, `{"a":"</tool_response>"}`, uint8(2))
	f.Add([]byte{4, 2 | 3<<3, 3, 3, 3}, "lookup", "  ", "\x00\xff\u2028", uint8(3))
	f.Add([]byte{2 | 1<<3}, "", `[1,2]`, "", uint8(1))
	f.Fuzz(func(t *testing.T, shape []byte, name, args, result string, choice uint8) {
		if len(shape) > 32 {
			return
		}
		roles := []iop.ChatRole{iop.ChatRole_CHAT_ROLE_SYSTEM, iop.ChatRole_CHAT_ROLE_USER, iop.ChatRole_CHAT_ROLE_ASSISTANT,
			iop.ChatRole_CHAT_ROLE_TOOL, iop.ChatRole_CHAT_ROLE_DEVELOPER}
		in := &iop.RunInput{Tools: []*iop.ToolDefinition{{Name: name, Parameters: []byte(args)}, {Name: "other"}}}
		in.ToolChoice = &iop.ToolChoice{Mode: iop.ToolChoiceMode(choice % 5), FunctionName: name}
		if choice&8 != 0 {
			in.ParallelToolCalls = proto.Bool(choice&16 != 0)
		}
		callID := 0
		for i, b := range shape {
			m := &iop.ChatMessage{Role: roles[int(b&7)%len(roles)]}
			if b&64 == 0 {
				m.Content = []*iop.ContentPart{textPart(fmt.Sprintf("turn %d %s", i, result))}
			}
			switch m.Role {
			case iop.ChatRole_CHAT_ROLE_ASSISTANT:
				for j := range int(b>>3) & 3 {
					callID++
					m.ToolCalls = append(m.ToolCalls, &iop.ToolCall{Id: fmt.Sprint("c", callID), Name: name + strings.Repeat("x", j), Arguments: args})
				}
			case iop.ChatRole_CHAT_ROLE_TOOL:
				m.ToolCallId = fmt.Sprint("c", callID)
				m.Content = []*iop.ContentPart{textPart(result)}
				if b&32 != 0 {
					m.Name = "named"
				}
			}
			in.Messages = append(in.Messages, m)
		}
		before := proto.Clone(in)
		out, marked := Input(in)
		if !proto.Equal(in, before) {
			t.Fatal("Input changed its input")
		}
		if out.Tools != nil || out.ToolChoice != nil || out.ParallelToolCalls != nil {
			t.Fatalf("native tool members left: %v", out)
		}
		if marked != (in.ToolChoice.Mode != iop.ToolChoiceMode_TOOL_CHOICE_MODE_NONE) {
			t.Fatalf("marked %v for choice %v", marked, in.ToolChoice.Mode)
		}
		// Expected, in order: each assistant turn (its text and calls), and
		// the results, with the name each takes.
		var turns []*iop.ChatMessage
		var wantResults [][2]string
		names := map[string]string{}
		for _, m := range in.Messages {
			switch m.Role {
			case iop.ChatRole_CHAT_ROLE_ASSISTANT:
				turns = append(turns, m)
				for _, c := range m.ToolCalls {
					names[c.Id] = c.Name
				}
			case iop.ChatRole_CHAT_ROLE_TOOL:
				n := m.Name
				if n == "" {
					n = names[m.ToolCallId]
				}
				wantResults = append(wantResults, [2]string{n, adapter.MessageText(m)})
			}
		}
		var gotResults [][2]string
		turn := 0
		for _, m := range out.Messages {
			if m.Role == iop.ChatRole_CHAT_ROLE_TOOL || len(m.ToolCalls) > 0 {
				t.Fatalf("native tool traffic left: %v", m)
			}
			text := adapter.MessageText(m)
			switch {
			case m.Role == iop.ChatRole_CHAT_ROLE_USER && strings.HasPrefix(text, "<tool_response>"):
				blocks40b(t, text, "tool_response", func(v json.RawMessage) {
					var r struct{ Name, Content string }
					if err := json.Unmarshal(v, &r); err != nil {
						t.Fatal(err)
					}
					gotResults = append(gotResults, [2]string{r.Name, r.Content})
				})
			case m.Role == iop.ChatRole_CHAT_ROLE_ASSISTANT:
				if turn >= len(turns) {
					t.Fatalf("an assistant turn too many: %q", text)
				}
				calls, prev := turns[turn].ToolCalls, adapter.MessageText(turns[turn])
				turn++
				if len(calls) == 0 {
					if text != prev {
						t.Fatalf("assistant text %q became %q", prev, text)
					}
					continue
				}
				if prev != "" {
					var ok bool
					if text, ok = strings.CutPrefix(text, prev+"\n"); !ok {
						t.Fatalf("assistant text %q lost: %q", prev, text)
					}
				}
				var got []json.RawMessage
				blocks40b(t, text, "tool_call", func(v json.RawMessage) { got = append(got, v) })
				if len(got) != len(calls) {
					t.Fatalf("%d blocks for %d calls: %q", len(got), len(calls), text)
				}
				for k, c := range calls {
					var call struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					}
					if err := json.Unmarshal(got[k], &call); err != nil || call.Name != asJSON40b(t, c.Name) || !json.Valid(call.Arguments) {
						t.Fatalf("block %s for call %v: %v", got[k], c, err)
					}
					switch a := strings.TrimSpace(c.Arguments); {
					case a == "":
						if string(call.Arguments) != "{}" {
							t.Fatalf("empty arguments became %s", call.Arguments)
						}
					case json.Valid([]byte(a)):
						if compact40b(t, call.Arguments) != compact40b(t, []byte(a)) {
							t.Fatalf("arguments %q became %s", a, call.Arguments)
						}
					default:
						var s string
						if json.Unmarshal(call.Arguments, &s) != nil || s != asJSON40b(t, c.Arguments) {
							t.Fatalf("arguments %q became %s", c.Arguments, call.Arguments)
						}
					}
				}
			}
		}
		if turn != len(turns) {
			t.Fatalf("%d assistant turns, want %d", turn, len(turns))
		}
		if len(gotResults) != len(wantResults) {
			t.Fatalf("%d results, want %d", len(gotResults), len(wantResults))
		}
		for i, r := range wantResults {
			if want := [2]string{asJSON40b(t, r[0]), asJSON40b(t, r[1])}; gotResults[i] != want {
				t.Fatalf("result %d: %q, want %q", i, gotResults[i], want)
			}
		}
	})
}
