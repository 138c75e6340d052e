package adapters

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	iopconfig "github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

type discardSink struct{}

func (discardSink) Delta(string) error { return nil }

// The member by which a normalized chat's earlier reasoning goes upstream
// follows the provider type the config names, under which the registry
// builds the adapter (the edge's tunnel keys the same choice on the same
// names, config.ProviderType*): vLLM "reasoning", llama.cpp
// "reasoning_content", openai_compat none.
func TestHistoryReasoningKeyedOnProviderType(t *testing.T) {
	for typ, member := range map[string]string{
		iopconfig.ProviderTypeVLLM:     "reasoning",
		iopconfig.ProviderTypeLlamaCpp: "reasoning_content",
		"openai_compat":                "",
	} {
		t.Run(typ, func(t *testing.T) {
			bodies := make(chan []byte, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				bodies <- b
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"6"},"finish_reason":"stop"}]}`)
			}))
			t.Cleanup(srv.Close)
			f, ok := Factories()[typ]
			if !ok {
				t.Fatalf("no adapter registered as %q", typ)
			}
			in, err := f(&iop.AdapterConfig{Name: "p", Type: typ, Capacity: 1, BaseUrl: srv.URL + "/v1"}, adapter.Env{Getenv: func(string) string { return "" }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = in.Close() })
			if _, err := in.Run(context.Background(), &iop.RunRequest{RunId: "r", Operation: adapter.OpChat, Target: "q",
				Input: testinput.Chat(`{"messages":[{"role":"user","content":"2+2?"},` +
					`{"role":"assistant","content":"4","reasoning":"Two and two."},{"role":"user","content":"3+3?"}]}`)}, discardSink{}); err != nil {
				t.Fatal(err)
			}
			var body struct {
				Messages []map[string]json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(<-bodies, &body); err != nil || len(body.Messages) != 3 {
				t.Fatalf("body: %v, %d messages", err, len(body.Messages))
			}
			turn := body.Messages[1]
			for _, name := range []string{"reasoning", "reasoning_content"} {
				got, ok := turn[name]
				if name == member && string(got) != `"Two and two."` || name != member && ok {
					t.Fatalf("assistant turn %v: %s = %s, want the reasoning under %q only", turn, name, got, member)
				}
			}
		})
	}
}
