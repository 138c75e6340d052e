package ollama

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An image data URL with nothing after ";base64," carries no image: it is
// the caller's error, not an empty image sent to Ollama.
func TestEmptyImageDataURLRefused(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, _, err := runChat(t, inst, `{"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,"}}]}]}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest {
		t.Fatalf("err = %v, want invalid_request", err)
	}
	select {
	case r := <-f.reqs:
		t.Fatalf("request sent upstream: %s", r.body)
	default:
	}
}

// top_k (set by the Anthropic surface, or vLLM's extension on OpenAI
// bodies) is an Ollama option of the same name.
func TestTopKReachesOptions(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	if _, _, err := runChat(t, inst, `{"messages":[{"role":"user","content":"hi"}],"top_k":40}`); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantJSON(t, "options", decodeBody(t, f.request(t).body)["options"], `{"top_k":40}`)
}

// A completion keeps the model loaded as long as a chat does.
func TestCompletionSendsKeepAlive(t *testing.T) {
	f := newFake(t)
	f.handle("/api/generate", ndjson(genLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, Settings: map[string]string{SettingKeepAlive: "10m"}})
	if _, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpCompletion, Target: "gemma3",
		Input: testinput.For(adapter.OpCompletion, `{"prompt":"hi"}`),
	}, newSink()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantJSON(t, "keep_alive", decodeBody(t, f.request(t).body)["keep_alive"], `"10m"`)
}

// Only a 2xx is an answer: a 300 (what a misconfigured proxy in front may
// send) is an upstream error carrying its status, never read as a stream.
func TestStatus300IsAnError(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusMultipleChoices)
		_, _ = io.WriteString(w, chatLineFinal+"\n")
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, _, err := runChat(t, inst, simpleChat)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusMultipleChoices || ae.Code != adapter.CodeUpstream {
		t.Fatalf("err = %v, want an upstream error with status 300", err)
	}
}

// Tool-call arguments of JSON null are not an object: refused unsent, as
// arrays and strings are (Ollama takes an object).
func TestNullToolArgumentsRefused(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, _, err := runChat(t, inst, `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"null"}}]}]}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest {
		t.Fatalf("err = %v, want invalid_request", err)
	}
}
