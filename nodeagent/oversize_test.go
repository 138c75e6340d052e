package nodeagent

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An answer too large for one wire frame (here embeddings of ~17 MiB) ends
// the run with an ERROR event that says so, not with a stream closed
// without a terminal event (which the edge would report as a lost node and
// retry elsewhere). Embeddings are sized by the request: invalid_request.
func TestOversizedAnswerIsAnErrorEvent(t *testing.T) {
	var doc bytes.Buffer
	doc.WriteString(`{"object":"list","data":[{"index":0,"object":"embedding","embedding":[`)
	for doc.Len() < nodewire.DefaultMaxFrameSize+(1<<20) {
		doc.WriteString("0.123456789,")
	}
	doc.WriteString(`0.5]}],"usage":{"prompt_tokens":1,"total_tokens":1}}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc.Bytes())
	}))
	defer up.Close()
	c := startOpenAICompatNode(t, up.URL+"/v1")
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "e1", Adapter: "oa", Target: "m", Operation: adapter.OpEmbedding,
		Input: testinput.For(adapter.OpEmbedding, `{"input":"a"}`),
	}}})
	ev := terminal(envs)
	if n := len(envs); n != 2 || ev.GetSequence() != 2 {
		t.Fatalf("got %d events, terminal sequence %d; want START then the terminal as 2", n, ev.GetSequence())
	}
	if ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != adapter.CodeInvalidRequest ||
		!strings.Contains(ev.GetError().GetMessage(), "16 MiB") {
		t.Fatalf("terminal = %v, want an invalid_request ERROR naming the 16 MiB frame limit", ev)
	}
	// The slot was given back: the next run on the one-slot instance is
	// not refused for capacity.
	envs = exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "e2", Adapter: "oa", Target: "m", Operation: adapter.OpEmbedding,
		Input: testinput.For(adapter.OpEmbedding, `{"input":"a"}`),
	}}})
	if ev := terminal(envs); ev.GetError().GetCode() == adapter.CodeCapacityExceeded {
		t.Fatalf("second run refused for capacity: %v", ev)
	}
}
