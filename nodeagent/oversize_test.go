package nodeagent

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// oversizeTestFrame is the frame bound the node of
// TestOversizedAnswerIsAnErrorEvent dials with. An answer over the
// production bound (16 MiB) takes the same path (nodewire.ErrFrameTooLarge
// from the stream's Send) as one over this, but moving 17 MiB through the
// wire under -race took over 30 s on a loaded machine; nodewire's own tests
// pin DefaultMaxFrameSize itself.
const oversizeTestFrame = 256 << 10

// startOversizeNode is startOpenAICompatNode with the node dialling its
// edge under a frame bound of maxFrame bytes.
func startOversizeNode(t *testing.T, baseURL string, maxFrame int) *nodewire.Conn {
	t.Helper()
	fe := startFakeEdge(t, &iop.NodeConfigPayload{
		Adapters:  []*iop.AdapterConfig{{Name: "oa", Type: "openai_compat", Category: "api", Capacity: 1, BaseUrl: baseURL}},
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 30000},
	}, nil)
	sup := NewSupervisor(SupervisorConfig{
		Dial:   nodewire.DialConfig{Address: fe.addr, HandshakeTimeout: 5 * time.Second, MaxFrameSize: maxFrame},
		NodeID: "n1", Token: "tok", Interval: 20 * time.Millisecond,
	}, fullAgent(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Owner: the test; stops at cancel in Cleanup.
	go func() { defer close(done); _ = sup.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return fe.nextReady(t)
}

// An answer too large for one wire frame (here embeddings over the node's
// frame bound) ends the run with an ERROR event that says so, not with a
// stream closed without a terminal event (which the edge would report as
// a lost node and retry elsewhere). Embeddings are sized by the request:
// invalid_request.
func TestOversizedAnswerIsAnErrorEvent(t *testing.T) {
	var doc bytes.Buffer
	doc.WriteString(`{"object":"list","data":[{"index":0,"object":"embedding","embedding":[`)
	for doc.Len() < oversizeTestFrame+(64<<10) {
		doc.WriteString("0.123456789,")
	}
	doc.WriteString(`0.5]}],"usage":{"prompt_tokens":1,"total_tokens":1}}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc.Bytes())
	}))
	defer up.Close()
	c := startOversizeNode(t, up.URL+"/v1", oversizeTestFrame)
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "e1", Adapter: "oa", Target: "m", Operation: adapter.OpEmbedding,
		Input: testinput.For(adapter.OpEmbedding, `{"input":"a"}`),
	}}})
	ev := terminal(envs)
	if n := len(envs); n != 2 || ev.GetSequence() != 2 {
		t.Fatalf("got %d events, terminal sequence %d; want START then the terminal as 2", n, ev.GetSequence())
	}
	// The message names the bound a production node dials with.
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
