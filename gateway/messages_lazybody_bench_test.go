package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// lazyBodyMessages is a Messages request of an agent's tool loop of turns
// rounds; with thinking, each assistant turn carries its thinking back.
func lazyBodyMessages(turns int, thinking bool) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":32000,"stream":true,"system":"You are an agent. ` + strings.Repeat("Follow the rules. ", 40) + `",` +
		`"tools":[{"name":"read_file","description":"Reads a file.","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],` +
		`"messages":[{"role":"user","content":"Fix the failing test."}`)
	for i := range turns {
		id := "toolu_" + string(rune('a'+i%26))
		b.WriteString(`,{"role":"assistant","content":[`)
		if thinking {
			b.WriteString(`{"type":"thinking","thinking":"` + strings.Repeat("Look at the parser first. ", 20) + `","signature":"` + strings.Repeat("x", 200) + `"},`)
		}
		b.WriteString(`{"type":"text","text":"Reading it."},{"type":"tool_use","id":"` + id + `","name":"read_file","input":{"path":"parser.go"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"` + strings.Repeat("func parse() {} ", 60) + `"}]}`)
	}
	b.WriteString(`],"thinking":{"type":"enabled","budget_tokens":31999}}`)
	return []byte(b.String())
}

// benchMessagesRun is a Messages request's cost on the edge up to a run's
// input: the call (parse, conversion) and the run input it sends.
func benchMessagesRun(b *testing.B, body []byte) {
	benchMessagesCall(b, body, func(k *call) error {
		_, err := k.parsed.RunInput()
		return err
	})
}

// benchMessagesCall is a Messages request's cost on the edge: the call
// (parse, conversion), then send, what an attempt renders of it.
func benchMessagesCall(b *testing.B, body []byte, send func(*call) error) {
	s := lazyBodyServer(b)
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
		k := s.messagesCall(c)
		if k == nil {
			b.Fatal("the request was refused")
		}
		if err := send(k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMessagesCallRun(b *testing.B) { benchMessagesRun(b, lazyBodyMessages(8, false)) }

func BenchmarkMessagesCallRunThinking(b *testing.B) { benchMessagesRun(b, lazyBodyMessages(8, true)) }
