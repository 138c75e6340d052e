package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A legacy completion stream of a model that thinks and then goes silent
// is cut by the stream idle timeout as the other streams are: reasoning
// starts the idle bound, the client gets the 200, its first chunk and then
// the error event (no [DONE]), the node is told to cancel and the lease
// is returned.
func TestCompletionStreamStalledAfterThinkingEndsAtIdleBound(t *testing.T) {
	cfg := fakeNodeConfig(t)
	idleConfig(cfg)
	e := startEdgeShortGrace(t, cfg)
	cancelled := make(chan bool, 1)
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		rr := first.GetRunRequest()
		if rr == nil {
			return
		}
		seq := uint64(0)
		for _, ev := range []*iop.RunEvent{{Type: iop.RunEventType_RUN_EVENT_TYPE_START}, thought("Let me think about alpha."), thought(" And on.")} {
			seq++
			ev.RunId, ev.Sequence = rr.GetRunId(), seq
			if st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}) != nil {
				return
			}
		}
		// Silent from here; the edge's cancel is the only way out.
		cancelled <- recvUntilCancel(nil, st)
	})

	r := post(t, e, "/v1/completions", thinkingCompletion)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	events := readEvents(t, r.Body)
	if len(events) < 2 {
		t.Fatalf("events %q", events)
	}
	if texts := cmplTexts(t, []byte("data: "+events[0]+"\n\n")); len(texts) != 1 || texts[0] != "" {
		t.Errorf("first event %q, want a chunk with empty text", events[0])
	}
	last := events[len(events)-1]
	var end struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last), &end); err != nil || !strings.Contains(end.Error.Message, "stream idle timeout") {
		t.Errorf("last event %q, want the idle timeout's error event", last)
	}
	if strings.Contains(string(r.Body), "[DONE]") {
		t.Errorf("a stream cut by the idle bound ended with [DONE]: %s", r.Body)
	}
	if !waitFor(t, cancelled, waitLong, "the node's cancel") {
		t.Error("the node's stream ended without a CancelRequest")
	}
	waitReleased(t, e, "mock")
}
