package anthropicapi

import (
	"strings"
	"testing"
)

// lazyBodyConversation is an agent's conversation of turns tool loops,
// each assistant turn with thinking (and a signature) before its tool call
// or answer, as Claude Code sends it back.
func lazyBodyConversation(turns int, thinking bool) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"You are an agent. ` + strings.Repeat("Follow the rules. ", 40) + `"}],` +
		`"tools":[{"name":"read_file","description":"Reads a file.","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},` +
		`{"name":"bash","description":"Runs a command.","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}],` +
		`"messages":[{"role":"user","content":"Fix the failing test in the parser package."}`)
	for i := range turns {
		b.WriteString(`,{"role":"assistant","content":[`)
		if thinking {
			b.WriteString(`{"type":"thinking","thinking":"` + strings.Repeat("I should look at the parser first. ", 20) + `","signature":"EqQBCkYIBxgCKkB` + strings.Repeat("x", 200) + `"},`)
		}
		b.WriteString(`{"type":"text","text":"Reading it."},{"type":"tool_use","id":"toolu_` + string(rune('a'+i%26)) + `","name":"read_file","input":{"path":"parser.go"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_` + string(rune('a'+i%26)) + `","content":"` + strings.Repeat("func parse() {} ", 60) + `"}]}`)
	}
	b.WriteString(`],"thinking":{"type":"enabled","budget_tokens":31999}}`)
	return []byte(b.String())
}

// benchConversion is what a Messages call converts before dispatch: the
// parse and the run body (OpenAIChat), and the tunnel body when tunnel is
// set.
func benchConversion(b *testing.B, body []byte, tunnel bool) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r, e := ParseRequest(body)
		if e != nil {
			b.Fatal(e)
		}
		chat, err := r.OpenAIChat()
		if err != nil {
			b.Fatal(err)
		}
		if tunnel {
			if _, err = r.TunnelChat(chat, ReasoningNone); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkMessagesRunBody(b *testing.B) {
	benchConversion(b, lazyBodyConversation(8, false), false)
}

func BenchmarkMessagesRunBodyThinking(b *testing.B) {
	benchConversion(b, lazyBodyConversation(8, true), false)
}

func BenchmarkMessagesTunnelBodyThinking(b *testing.B) {
	benchConversion(b, lazyBodyConversation(8, true), true)
}
