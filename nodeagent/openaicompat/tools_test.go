package openaicompat

import (
	"encoding/json"
	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
	"strings"
	"testing"
)

func decodeMessages(t *testing.T, body map[string]json.RawMessage) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		t.Fatalf("messages: %v", err)
	}
	return msgs
}

func textBody(t *testing.T, input string) (map[string]json.RawMessage, bool) {
	t.Helper()
	in, marked := textToolInput(testinput.Chat(input))
	out, err := requestBody(in, adapter.OpChat, "m", "")
	if err != nil {
		t.Fatalf("requestBody: %v", err)
	}
	return out, marked
}

func countSystem(msgs []map[string]any) int {
	n := 0
	for _, m := range msgs {
		if m["role"] == "system" {
			n++
		}
	}
	return n
}

func TestMergeSystemWithoutSystemMessage(t *testing.T) {
	out, marked := textBody(t, `{"messages":[{"role":"user","content":"hi"}],"tools":`+weatherTools+`}`)
	msgs := decodeMessages(t, out)
	if !marked || len(msgs) != 2 || countSystem(msgs) != 1 {
		t.Fatalf("messages %v", msgs)
	}
	content, _ := msgs[0]["content"].(string)
	if msgs[0]["role"] != "system" || !strings.Contains(content, "## get_weather") {
		t.Fatalf("leading message %v", msgs[0])
	}
	if msgs[1]["content"] != "hi" {
		t.Fatalf("user message changed: %v", msgs[1])
	}
}

func TestMergeSystemStringContent(t *testing.T) {
	out, _ := textBody(t, `{"messages":[{"role":"system","content":"Be brief.","name":"ops"},{"role":"user","content":"hi"}],"tools":`+weatherTools+`}`)
	msgs := decodeMessages(t, out)
	if len(msgs) != 2 || countSystem(msgs) != 1 {
		t.Fatalf("messages %v", msgs)
	}
	content := msgs[0]["content"].(string)
	if !strings.HasPrefix(content, "Be brief.\n\n# Tools") || msgs[0]["name"] != "ops" {
		t.Fatalf("system message %v", msgs[0])
	}
}

func TestMergeSystemArrayContent(t *testing.T) {
	out, _ := textBody(t, `{"messages":[{"role":"system","content":[{"type":"text","text":"Be brief."}]},{"role":"user","content":"hi"}],"tools":`+weatherTools+`}`)
	msgs := decodeMessages(t, out)
	if len(msgs) != 2 || countSystem(msgs) != 1 {
		t.Fatalf("messages %v", msgs)
	}
	// One text part reads as a string: the instruction joins its text.
	content := msgs[0]["content"].(string)
	if !strings.HasPrefix(content, "Be brief.\n\n# Tools") || !strings.Contains(content, "<tool_call>") {
		t.Fatalf("system content %q", content)
	}
}

func TestToolInstructionChoices(t *testing.T) {
	tools := testinput.Chat(`{"messages":[],"tools":` + weatherTools + `}`).GetTools()
	mode := func(m iop.ToolChoiceMode, name string) *iop.RunInput {
		return &iop.RunInput{Tools: tools, ToolChoice: &iop.ToolChoice{Mode: m, FunctionName: name}}
	}
	if s := toolInstruction(mode(iop.ToolChoiceMode_TOOL_CHOICE_MODE_NONE, "")); s != "" {
		t.Fatalf("tool_choice none still instructs: %q", s)
	}
	if s := toolInstruction(mode(iop.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED, "")); !strings.Contains(s, "must call at least one tool") {
		t.Fatalf("required: %q", s)
	}
	if s := toolInstruction(mode(iop.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, "get_weather")); !strings.Contains(s, "must call the tool get_weather") {
		t.Fatalf("named: %q", s)
	}
	s := toolInstruction(&iop.RunInput{Tools: tools})
	for _, want := range []string{
		`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`,
		"Description: Current weather for a city",
		`Parameters (JSON schema): {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("instruction lacks %q:\n%s", want, s)
		}
	}
}

func TestTextToolBodyNoneChoiceIsNotMarked(t *testing.T) {
	out, marked := textBody(t, `{"messages":[{"role":"user","content":"hi"}],"tools":`+weatherTools+`,"tool_choice":"none"}`)
	if marked || len(decodeMessages(t, out)) != 1 {
		t.Fatalf("marked=%v messages %s", marked, out["messages"])
	}
}

func TestTextHistoryRendersToolTraffic(t *testing.T) {
	out, _ := textBody(t, `{"tools":`+weatherTools+`,"messages":[
		{"role":"user","content":"Weather in Paris and Lyon?"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"18C"},
		{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"21C"}]},
		{"role":"user","content":"Thanks"}]}`)
	msgs := decodeMessages(t, out)
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		roles[i], _ = m["role"].(string)
	}
	if strings.Join(roles, ",") != "system,user,assistant,user,user" {
		t.Fatalf("roles %v", roles)
	}
	asst := msgs[2]
	if _, ok := asst["tool_calls"]; ok {
		t.Fatal("assistant tool_calls kept")
	}
	if asst["content"] != `<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>`+"\n"+`<tool_call>{"name":"get_weather","arguments":{"city":"Lyon"}}</tool_call>` {
		t.Fatalf("assistant content %q", asst["content"])
	}
	if msgs[3]["content"] != `<tool_response>{"name":"get_weather","content":"18C"}</tool_response>`+"\n"+`<tool_response>{"name":"get_weather","content":"21C"}</tool_response>` {
		t.Fatalf("tool responses %q", msgs[3]["content"])
	}
}

func TestRejectsTools(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   bool
	}{
		{400, vllmToolChoiceError, true},
		{400, vllmToolChoiceErrorV2, true},
		{422, `{"detail":[{"type":"extra_forbidden","loc":["body","tools"],"msg":"Extra inputs are not permitted","input":[]}]}`, true},
		{400, `{"error":"registry.ollama.ai/library/gemma:2b does not support tools"}`, true},
		{400, `{"object":"error","message":"max_tokens must be at least 1, got 0.","type":"BadRequestError","param":null,"code":400}`, false},
		{401, `{"error":{"message":"Invalid tool access key","type":"auth"}}`, false},
		{404, `{"object":"error","message":"The model ` + "`toolformer`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, false},
		{500, `{"error":{"message":"tool parser crashed","type":"InternalServerError"}}`, false},
		// The word only in the raw body, not in the message, does not count.
		{400, `{"object":"error","message":"bad request","type":"BadRequestError","param":"tools","code":400}`, false},
	}
	for _, c := range cases {
		if got := rejectsTools(parseUpstreamError(c.status, []byte(c.body))); got != c.want {
			t.Errorf("%d %s: got %v", c.status, c.body, got)
		}
	}
}

func TestParseUpstreamErrorShapes(t *testing.T) {
	cases := map[string]string{
		vllmToolChoiceError:                    `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`,
		vllmToolChoiceErrorV2:                  `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`,
		`{"error":"model not loaded"}`:         "model not loaded",
		`{"detail":"Not Found"}`:               "Not Found",
		`Internal Server Error`:                "Internal Server Error",
		``:                                     "Bad Gateway",
		`{"error":{"code":"x"},"message":"m"}`: "m",
		// A type that is not a string (servers differ) costs nothing:
		// the message is still read, not the whole body quoted.
		`{"error":{"message":"m","type":5},"type":[1]}`: "m",
	}
	for body, want := range cases {
		status := 400
		if body == "" {
			status = 502
		}
		if got := parseUpstreamError(status, []byte(body)).message; got != want {
			t.Errorf("%q: got %q want %q", body, got, want)
		}
	}
	long := parseUpstreamError(500, []byte(strings.Repeat("é", 2000))).message
	if len(long) > maxErrorMessage+len("…") || !strings.HasSuffix(long, "…") {
		t.Errorf("long body not truncated: %d bytes", len(long))
	}
}
