package gateway_test

import (
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// An upstream that reports no usage: the Messages answer still reports the
// edge's input estimate, as the streamed answer's message_start does, and
// not an input of 0 tokens.
func TestMessagesWithoutUpstreamUsageReportEstimatedInput(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}]}`)
	})
	s := tunnelStack(t, u)
	cl := anClient(t, s.Edge, "")
	msg, err := cl.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64,
		Messages: []anthropic.MessageParam{userText("Please say hello to everyone in the room.")}})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
		t.Fatalf("usage = %+v, want estimates above 0", msg.Usage)
	}
}
