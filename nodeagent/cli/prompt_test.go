package cli

import (
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestRenderPrompt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     iop.RunOperation
		input  string
		resume bool
		want   string
	}{
		{"single user", adapter.OpChat, `{"messages":[{"role":"user","content":"hello"}]}`, false, "hello"},
		{"text parts", adapter.OpChat, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, false, "a\nb"},
		{"transcript", adapter.OpChat, `{"messages":[
			{"role":"system","content":"be brief"},
			{"role":"user","content":"hi"},
			{"role":"assistant","content":"hello"},
			{"role":"user","content":"more"}]}`, false,
			"System: be brief\n\nUser: hi\n\nAssistant: hello\n\nUser: more"},
		{"developer and tool", adapter.OpChat, `{"messages":[
			{"role":"developer","content":"d"},
			{"role":"assistant","content":null},
			{"role":"tool","content":"42"}]}`, false,
			"System: d\n\nTool: 42"},
		{"empty messages ignored", adapter.OpChat, `{"messages":[{"role":"system","content":""},{"role":"user","content":"only"}]}`, false, "only"},
		{"user first of several is a transcript", adapter.OpChat, `{"messages":[
			{"role":"user","content":"a"},
			{"role":"assistant","content":"b"},
			{"role":"user","content":"c"}]}`, false,
			"User: a\n\nAssistant: b\n\nUser: c"},
		{"single assistant is a transcript", adapter.OpChat, `{"messages":[{"role":"assistant","content":"a"}]}`, false, "Assistant: a"},
		{"resume sends last user", adapter.OpChat, `{"messages":[
			{"role":"user","content":"first"},
			{"role":"assistant","content":"answer"},
			{"role":"user","content":"second"},
			{"role":"tool","content":"t"}]}`, true, "second"},
		{"completion", adapter.OpCompletion, `{"prompt":"once upon"}`, false, "once upon"},
		{"completion array", adapter.OpCompletion, `{"prompt":["once upon"]}`, true, "once upon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := parseInput(tc.op, testinput.For(tc.op, tc.input))
			if err != nil {
				t.Fatalf("parseInput: %v", err)
			}
			got, err := in.render(tc.resume)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if got != tc.want {
				t.Fatalf("prompt = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRenderPromptRejects(t *testing.T) {
	user := func(parts ...*iop.ContentPart) *iop.ChatMessage {
		return &iop.ChatMessage{Role: iop.ChatRole_CHAT_ROLE_USER, Content: parts}
	}
	text := func(s string) *iop.ContentPart { return &iop.ContentPart{Part: &iop.ContentPart_Text{Text: s}} }
	for _, tc := range []struct {
		name   string
		in     *iop.RunInput
		resume bool
	}{
		{"no input", nil, false},
		{"no messages", &iop.RunInput{}, false},
		{"unknown role", &iop.RunInput{Messages: []*iop.ChatMessage{{Role: iop.ChatRole(99), Content: []*iop.ContentPart{text("x")}}}}, false},
		{"image part", &iop.RunInput{Messages: []*iop.ChatMessage{user(text("see"), &iop.ContentPart{Part: &iop.ContentPart_Image{Image: &iop.ImagePart{Url: "data:image/png;base64,AA=="}}})}}, false},
		{"no text at all", &iop.RunInput{Messages: []*iop.ChatMessage{user(text(""))}}, false},
		{"resume without user", &iop.RunInput{Messages: []*iop.ChatMessage{{Role: iop.ChatRole_CHAT_ROLE_SYSTEM, Content: []*iop.ContentPart{text("s")}}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := parseInput(adapter.OpChat, tc.in)
			if err == nil {
				_, err = in.render(tc.resume)
			}
			if errCode(err) != adapter.CodeInvalidRequest {
				t.Fatalf("err = %v, want code %s", err, adapter.CodeInvalidRequest)
			}
		})
	}
}
