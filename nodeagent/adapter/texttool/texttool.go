// Package texttool is the text tool-call form shared by the adapters whose
// backend cannot take native tools (a server without tool parsing, a model
// without a tool template): the tools are described in the system message,
// earlier tool calls and results are rendered as <tool_call> and
// <tool_response> text, and the Edge parses the <tool_call> blocks of the
// answer back into OpenAI tool_calls (CONTRACT §5) when the run's result
// carries adapter.MetaTextToolFallback.
package texttool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/internal/jsonenc"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Input rewrites a chat input for the text tool-call protocol:
// native tools and tool choice removed, earlier tool calls and results
// rendered as text, and the instruction merged into the leading system
// message. It reports whether an instruction was added (not for tool
// choice none). in is not modified.
func Input(in *iop.RunInput) (*iop.RunInput, bool) {
	instruction := Instruction(in)
	out := proto.Clone(in).(*iop.RunInput)
	out.Tools, out.ToolChoice, out.ParallelToolCalls = nil, nil, nil
	out.Messages = textHistory(out.GetMessages())
	if instruction != "" {
		out.Messages = mergeSystem(out.Messages, instruction)
	}
	return out, instruction != ""
}

// Instruction renders the offered tools and the exact call syntax the
// Edge parses back (CONTRACT §5), with the caller's constraints stated as
// the Edge enforces them when it restores the calls:
//   - tool_choice none: no instruction at all (empty);
//   - tool_choice {"function": X} with X among the tools: only X is listed
//     and the model is told to call X and no other tool;
//   - tool_choice required: the model is told to call at least one tool;
//   - parallel_tool_calls false: at most one call (one block) per answer,
//     "exactly one" with required or a named function.
func Instruction(in *iop.RunInput) string {
	tools, choice := in.GetTools(), in.GetToolChoice()
	single := in.ParallelToolCalls != nil && !in.GetParallelToolCalls()
	var must string
	switch choice.GetMode() {
	case iop.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:
		return ""
	case iop.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
		must = "\nYou must call at least one tool in this answer.\n"
		if single {
			must = "\nYou must call exactly one tool in this answer.\n"
		}
	case iop.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION:
		if n := choice.GetFunctionName(); n != "" {
			if named := namedTool(tools, n); named != nil {
				tools = named
			}
			must = fmt.Sprintf("\nYou must call the tool %s in this answer, and no other tool.\n", n)
			if single {
				must = fmt.Sprintf("\nYou must call the tool %s exactly once in this answer, and no other tool.\n", n)
			}
		}
	}
	var b strings.Builder
	b.WriteString("# Tools\n\n")
	b.WriteString("You can call the tools listed below. To call a tool, answer with one block per call, exactly in this form, with the arguments as a JSON object that matches the tool's parameters schema:\n")
	b.WriteString(`<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>` + "\n")
	b.WriteString("For example, a call to a tool named get_weather looks like:\n")
	b.WriteString(`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>` + "\n")
	if single {
		b.WriteString("Make at most one call in this answer, a single block; you get its result before you call again.")
	} else {
		b.WriteString("You may make several calls, one block each.")
	}
	b.WriteString(" Call only the tools listed here. Tool results come back in <tool_response> blocks.\n\n")
	b.WriteString("Available tools:\n")
	for _, t := range tools {
		if t.GetName() == "" {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n", t.GetName())
		if d := strings.TrimSpace(t.GetDescription()); d != "" {
			fmt.Fprintf(&b, "Description: %s\n", d)
		}
		params := compactJSON(t.GetParameters())
		if params == "" || params == "null" {
			params = `{"type": "object", "properties": {}}`
		}
		fmt.Fprintf(&b, "Parameters (JSON schema): %s\n", params)
	}
	b.WriteString(must)
	return b.String()
}

// namedTool is the definition of the tool named name, as a one-element
// list, or nil when no tool has that name (the Edge then restores no call:
// the instruction still lists every tool, as it cannot do better).
func namedTool(tools []*iop.ToolDefinition, name string) []*iop.ToolDefinition {
	for i, t := range tools {
		if t.GetName() == name {
			return tools[i : i+1 : i+1]
		}
	}
	return nil
}

func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return ""
	}
	return buf.String()
}

func textPart(s string) *iop.ContentPart {
	return &iop.ContentPart{Part: &iop.ContentPart_Text{Text: s}}
}

// mergeSystem adds instruction to the system message, so that backends that
// accept a single leading system message (many chat templates) keep working:
// appended to the first system (or developer) message when there is one
// (to its text when that is all it holds, else as one more text part),
// otherwise inserted as a new system message at index 0.
func mergeSystem(messages []*iop.ChatMessage, instruction string) []*iop.ChatMessage {
	for _, m := range messages {
		if r := m.GetRole(); r == iop.ChatRole_CHAT_ROLE_SYSTEM || r == iop.ChatRole_CHAT_ROLE_DEVELOPER {
			switch c := m.GetContent(); {
			case len(c) == 0:
				m.Content = []*iop.ContentPart{textPart(instruction)}
			case len(c) == 1 && c[0].GetImage() == nil:
				m.Content = []*iop.ContentPart{textPart(c[0].GetText() + "\n\n" + instruction)}
			default:
				m.Content = append(c, textPart(instruction))
			}
			return messages
		}
	}
	sys := &iop.ChatMessage{Role: iop.ChatRole_CHAT_ROLE_SYSTEM, Content: []*iop.ContentPart{textPart(instruction)}}
	return append([]*iop.ChatMessage{sys}, messages...)
}

// textHistory renders earlier native tool traffic as text, since a backend
// that rejects tools usually cannot template tool_calls or role "tool"
// either: an assistant's tool calls become <tool_call> blocks in its
// content, and tool results become a user message of <tool_response> blocks
// (consecutive results share one message to keep roles alternating).
func textHistory(messages []*iop.ChatMessage) []*iop.ChatMessage {
	names := map[string]string{} // tool_call_id -> function name
	out := make([]*iop.ChatMessage, 0, len(messages))
	var pending []string // tool responses waiting to be flushed
	flush := func() {
		if len(pending) > 0 {
			out = append(out, &iop.ChatMessage{Role: iop.ChatRole_CHAT_ROLE_USER, Content: []*iop.ContentPart{textPart(strings.Join(pending, "\n"))}})
			pending = nil
		}
	}
	for _, m := range messages {
		switch m.GetRole() {
		case iop.ChatRole_CHAT_ROLE_TOOL:
			name := m.GetName()
			if n, ok := names[m.GetToolCallId()]; ok && name == "" {
				name = n
			}
			resp := struct {
				Name    string `json:"name"`
				Content string `json:"content"`
			}{name, adapter.MessageText(m)}
			pending = append(pending, "<tool_response>"+string(mustJSON(resp))+"</tool_response>")
			continue
		case iop.ChatRole_CHAT_ROLE_ASSISTANT:
			if len(m.GetToolCalls()) > 0 {
				m = renderToolCalls(m, names)
			}
		}
		flush()
		out = append(out, m)
	}
	flush()
	return out
}

// renderToolCalls returns an assistant message with its tool calls written
// as <tool_call> blocks after its text: arguments that are JSON as they
// are (compacted by the block's encoding), others as a JSON string. Its
// reasoning is kept: the adapter sends it back as its backend reads it
// (a template such as Qwen 3's keeps the reasoning of the turns after the
// last user query, and takes a user turn of <tool_response> blocks, the
// text form's tool results, for no query).
func renderToolCalls(m *iop.ChatMessage, names map[string]string) *iop.ChatMessage {
	blocks := make([]string, 0, len(m.GetToolCalls()))
	for _, c := range m.GetToolCalls() {
		names[c.GetId()] = c.GetName()
		args := json.RawMessage(strings.TrimSpace(c.GetArguments()))
		switch {
		case len(args) == 0:
			// A call without arguments: the object the instruction asks
			// for, not "", which a model would copy.
			args = json.RawMessage(`{}`)
		case !json.Valid(args):
			args = mustJSON(c.GetArguments())
		}
		call := struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{c.GetName(), args}
		blocks = append(blocks, "<tool_call>"+string(mustJSON(call))+"</tool_call>")
	}
	text := strings.Join(blocks, "\n")
	if prev := adapter.MessageText(m); prev != "" {
		text = prev + "\n" + text
	}
	return &iop.ChatMessage{Role: m.GetRole(), Name: m.GetName(), Reasoning: m.GetReasoning(), Content: []*iop.ContentPart{textPart(text)}}
}

// mustJSON encodes values that cannot fail to encode (strings, maps of
// strings, raw JSON already validated), HTML escaping off so that the
// <tool_call> blocks a model reads are written plainly.
func mustJSON(v any) json.RawMessage { return jsonenc.Must("texttool", v) }

// Mark records on res that its answer is in the text form, so that the
// Edge restores the <tool_call> blocks as tool_calls.
func Mark(res *adapter.Result) {
	if res.Metadata == nil {
		res.Metadata = map[string]string{}
	}
	res.Metadata[adapter.MetaTextToolFallback] = "true"
}
