package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Request fields that only make sense with native tools; the text fallback
// removes them all.
var nativeToolFields = []string{"tools", "tool_choice", "parallel_tool_calls"}

// hasTools reports whether the request offers at least one tool.
func hasTools(body map[string]json.RawMessage) bool {
	var tools []json.RawMessage
	return json.Unmarshal(body["tools"], &tools) == nil && len(tools) > 0
}

// rejectsTools reports whether an upstream error is the backend refusing
// native tools (vLLM without --enable-auto-tool-choice, servers that do not
// know the fields, models without tool templates). It looks at the parsed
// message only, never at the raw body, and skips statuses that say nothing
// about the request's shape (auth, missing model, rate limits).
func rejectsTools(ue upstreamError) bool {
	switch ue.status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return ue.status >= 400 && ue.status < 500 &&
		strings.Contains(strings.ToLower(ue.message), "tool")
}

type toolDef struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// textToolBody rewrites a chat request for the text tool-call protocol:
// native tool fields removed, earlier tool calls and results rendered as
// text, and the instruction merged into the leading system message. It
// reports whether an instruction was added (not for tool_choice "none").
func textToolBody(body map[string]json.RawMessage) (map[string]json.RawMessage, bool, error) {
	var tools []toolDef
	if err := json.Unmarshal(body["tools"], &tools); err != nil {
		return nil, false, invalidInput("input: tools must be an array of tool objects")
	}
	var messages []map[string]json.RawMessage
	if err := json.Unmarshal(body["messages"], &messages); err != nil {
		return nil, false, invalidInput("input: messages must be an array of message objects")
	}
	instruction := toolInstruction(tools, body["tool_choice"])

	out := make(map[string]json.RawMessage, len(body))
	for k, v := range body {
		out[k] = v
	}
	for _, f := range nativeToolFields {
		delete(out, f)
	}
	messages = textHistory(messages)
	if instruction != "" {
		messages = mergeSystem(messages, instruction)
	}
	raw, err := json.Marshal(messages)
	if err != nil {
		return nil, false, fmt.Errorf("openaicompat: encode messages: %w", err)
	}
	out["messages"] = raw
	return out, instruction != "", nil
}

// toolInstruction renders the offered tools and the exact call syntax the
// Edge parses back (CONTRACT §5). Empty when tool_choice is "none".
func toolInstruction(tools []toolDef, choice json.RawMessage) string {
	var must string
	switch c := jsonString(choice); {
	case c == "none":
		return ""
	case c == "required":
		must = "\nYou must call at least one tool in this answer.\n"
	case len(choice) > 0 && choice[0] == '{':
		var named toolDef
		if json.Unmarshal(choice, &named) == nil && named.Function.Name != "" {
			must = fmt.Sprintf("\nYou must call the tool %s in this answer.\n", named.Function.Name)
		}
	}
	var b strings.Builder
	b.WriteString("# Tools\n\n")
	b.WriteString("You can call the tools listed below. To call a tool, answer with one block per call, exactly in this form, with the arguments as a JSON object that matches the tool's parameters schema:\n")
	b.WriteString(`<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>` + "\n")
	b.WriteString("For example, a call to a tool named get_weather looks like:\n")
	b.WriteString(`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>` + "\n")
	b.WriteString("You may make several calls, one block each. Call only the tools listed here. Tool results come back in <tool_response> blocks.\n\n")
	b.WriteString("Available tools:\n")
	for _, t := range tools {
		if t.Function.Name == "" {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n", t.Function.Name)
		if d := strings.TrimSpace(t.Function.Description); d != "" {
			fmt.Fprintf(&b, "Description: %s\n", d)
		}
		params := compactJSON(t.Function.Parameters)
		if params == "" || params == "null" {
			params = `{"type": "object", "properties": {}}`
		}
		fmt.Fprintf(&b, "Parameters (JSON schema): %s\n", params)
	}
	b.WriteString(must)
	return b.String()
}

func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return ""
	}
	return buf.String()
}

// mergeSystem adds instruction to the system message, so that backends that
// accept a single leading system message (many chat templates) keep working:
// appended to the first system (or developer) message when there is one,
// otherwise inserted as a new system message at index 0.
func mergeSystem(messages []map[string]json.RawMessage, instruction string) []map[string]json.RawMessage {
	for _, m := range messages {
		if role := jsonString(m["role"]); role == "system" || role == "developer" {
			m["content"] = appendText(m["content"], instruction)
			return messages
		}
	}
	sys := map[string]json.RawMessage{
		"role":    json.RawMessage(`"system"`),
		"content": mustJSON(instruction),
	}
	return append([]map[string]json.RawMessage{sys}, messages...)
}

// appendText appends text to a message content that is a string, an array
// of content parts, or absent/null.
func appendText(content json.RawMessage, text string) json.RawMessage {
	if s := jsonString(content); s != "" {
		return mustJSON(s + "\n\n" + text)
	}
	var parts []json.RawMessage
	if json.Unmarshal(content, &parts) == nil && len(parts) > 0 {
		parts = append(parts, mustJSON(map[string]string{"type": "text", "text": text}))
		return mustJSON(parts)
	}
	return mustJSON(text)
}

// textHistory renders earlier native tool traffic as text, since a backend
// that rejects tools usually cannot template tool_calls or role "tool"
// either: an assistant's tool_calls become <tool_call> blocks in its
// content, and tool results become a user message of <tool_response> blocks
// (consecutive results share one message to keep roles alternating).
func textHistory(messages []map[string]json.RawMessage) []map[string]json.RawMessage {
	names := map[string]string{} // tool_call_id -> function name
	out := make([]map[string]json.RawMessage, 0, len(messages))
	var pending []string // tool responses waiting to be flushed
	flush := func() {
		if len(pending) > 0 {
			out = append(out, map[string]json.RawMessage{
				"role":    json.RawMessage(`"user"`),
				"content": mustJSON(strings.Join(pending, "\n")),
			})
			pending = nil
		}
	}
	for _, m := range messages {
		switch jsonString(m["role"]) {
		case "tool", "function":
			name := jsonString(m["name"])
			if n, ok := names[jsonString(m["tool_call_id"])]; ok && name == "" {
				name = n
			}
			resp := struct {
				Name    string `json:"name"`
				Content string `json:"content"`
			}{name, contentText(m["content"])}
			pending = append(pending, "<tool_response>"+string(mustJSON(resp))+"</tool_response>")
			continue
		case "assistant":
			if calls, ok := m["tool_calls"]; ok {
				m = renderToolCalls(m, calls, names)
			}
		}
		flush()
		out = append(out, m)
	}
	flush()
	return out
}

func renderToolCalls(m map[string]json.RawMessage, raw json.RawMessage, names map[string]string) map[string]json.RawMessage {
	var calls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &calls) != nil {
		return m
	}
	blocks := make([]string, 0, len(calls))
	for _, c := range calls {
		names[c.ID] = c.Function.Name
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			args = mustJSON(c.Function.Arguments)
		}
		call := struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{c.Function.Name, args}
		blocks = append(blocks, "<tool_call>"+string(mustJSON(call))+"</tool_call>")
	}
	cp := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		cp[k] = v
	}
	delete(cp, "tool_calls")
	text := strings.Join(blocks, "\n")
	if prev := contentText(m["content"]); prev != "" {
		text = prev + "\n" + text
	}
	cp["content"] = mustJSON(text)
	return cp
}

// contentText flattens a message content (string or content parts) to text.
func contentText(content json.RawMessage) string {
	if s := jsonString(content); s != "" {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// mustJSON encodes values that cannot fail to encode (strings, maps of
// strings, raw JSON already validated). HTML escaping stays off so that
// the <tool_call> blocks a model reads are written plainly.
func mustJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("openaicompat: encode %T: %v", v, err))
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
