package cli

import (
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

func TestRenderPrompt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     string
		input  string
		resume bool
		want   string
	}{
		{"single user", adapter.OpChat, `{"messages":[{"role":"user","content":"hello"}]}`, false, "hello"},
		{"text parts", adapter.OpChat, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, false, "ab"},
		{"empty op is chat", "", `{"messages":[{"role":"user","content":"x"}]}`, false, "x"},
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
			in, err := parseInput(tc.op, []byte(tc.input))
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
	for _, tc := range []struct {
		name, op, input string
		resume          bool
	}{
		{"not json", adapter.OpChat, `{`, false},
		{"no messages", adapter.OpChat, `{}`, false},
		{"unknown role", adapter.OpChat, `{"messages":[{"role":"wizard","content":"x"}]}`, false},
		{"image part", adapter.OpChat, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, false},
		{"number content", adapter.OpChat, `{"messages":[{"role":"user","content":5}]}`, false},
		{"no text at all", adapter.OpChat, `{"messages":[{"role":"user","content":""}]}`, false},
		{"resume without user", adapter.OpChat, `{"messages":[{"role":"system","content":"s"}]}`, true},
		{"completion without prompt", adapter.OpCompletion, `{}`, false},
		{"completion batch", adapter.OpCompletion, `{"prompt":["a","b"]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := parseInput(tc.op, []byte(tc.input))
			if err == nil {
				_, err = in.render(tc.resume)
			}
			if errCode(err) != adapter.CodeInvalidRequest {
				t.Fatalf("err = %v, want code %s", err, adapter.CodeInvalidRequest)
			}
		})
	}
}
