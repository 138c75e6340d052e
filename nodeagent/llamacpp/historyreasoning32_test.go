package llamacpp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An assistant turn's earlier reasoning reaches llama-server as
// reasoning_content, the member its common_chat_msgs_parse_oaicompat
// reads (the template then renders it for the turns that keep it).
func TestRunSendsHistoryReasoningAsReasoningContent(t *testing.T) {
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		w.Header().Set("Server", "llama.cpp")
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, chatJSON)
	}))
	t.Cleanup(srv.Close)
	in := newInstance(t, &server{Server: srv})
	text := func(s string) []*iop.ContentPart { return []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: s}}} }
	_, err := in.Run(context.Background(), &iop.RunRequest{RunId: "r", Operation: adapter.OpChat, Target: "q",
		Input: &iop.RunInput{Messages: []*iop.ChatMessage{
			{Role: iop.ChatRole_CHAT_ROLE_USER, Content: text("2+2?")},
			{Role: iop.ChatRole_CHAT_ROLE_ASSISTANT, Content: text("4"), Reasoning: "Two and two make four."},
			{Role: iop.ChatRole_CHAT_ROLE_USER, Content: text("And 3+3?")},
		}}}, &deltas{})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(<-bodies, &body); err != nil {
		t.Fatal(err)
	}
	const want = `{"role":"assistant","content":"4","reasoning_content":"Two and two make four."}`
	if len(body.Messages) != 3 || string(body.Messages[1]) != want {
		t.Fatalf("messages %s, want the second %s", body.Messages, want)
	}
}
