package ollama

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Ollama's response headers are bounded as every other provider client's
// on the node (maxResponseHeaderBytes), not by net/http's 10 MB default: a
// broken Ollama, or a proxy in front of it, answering each run with
// megabytes of headers must not cost the node that much per run.
func TestResponseHeadersBounded(t *testing.T) {
	f := newFake(t)
	pad := strings.Repeat("p", 8<<10)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		for i := range 128 { // 1 MiB
			w.Header().Set("X-Pad-"+strconv.Itoa(i), pad)
		}
		ndjson(chatLineThe, chatLineFinal)(w, r)
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(simpleChat)}, newSink())
	if err == nil {
		t.Fatal("a run answered with 1 MiB of headers succeeded")
	}
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream {
		t.Fatalf("err = %v, want an upstream error", err)
	}
}
