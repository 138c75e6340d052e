package ollama

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An upstream (Ollama, or a proxy in front of it) that sends the whole
// answer, done line included, and then leaves the chunked body open: the
// answer is complete, so the run must complete, not wait for the body's end
// until the Edge gives up (the capacity slot held meanwhile).
func TestDoneLineThenSilence(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	defer close(release)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		for _, l := range []string{chatLineThe, chatLineSky, chatLineFinal} {
			_, _ = io.WriteString(w, l+"\n")
			w.(http.Flusher).Flush()
		}
		select { // body left open
		case <-release:
		case <-r.Context().Done():
		}
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	// A run that waits for the body's end runs into ctx (the body stays
	// open until the test returns); one that completes on the done line
	// takes milliseconds, well under the bound even on a loaded box.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	res, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(simpleChat)}, newSink())
	if err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("run after a complete answer: res=%v err=%v after %s (the done line arrived at once)", res, err, time.Since(start))
	}
}
