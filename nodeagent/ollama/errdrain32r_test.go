package ollama

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// What follows a stream's done line (the end of its chunked body) is
// drained, so that its connection serves the next run: the server ends
// the body only once the client has read the done line.
func TestStreamEndDrainedAfterDoneLine(t *testing.T) {
	f := newFake(t)
	reached := make(chan struct{}, 1)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		ndjson(chatLineThe, chatLineFinal)(w, r)
		select { // the body's end, once the done line was read
		case <-reached:
		case <-r.Context().Done():
		}
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	var first atomic.Bool
	wrapBodies(inst, func(body io.ReadCloser) io.ReadCloser {
		if !first.CompareAndSwap(false, true) {
			return body
		}
		return &signalAt{ReadCloser: body, left: len(chatLineThe) + len(chatLineFinal) + 2, reached: reached}
	})
	if _, _, err := runChat(t, inst, simpleChat); err != nil {
		t.Fatal(err)
	}
	f.request(t)
	f.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
	if _, _, err := runChat(t, inst, simpleChat); err != nil {
		t.Fatal(err)
	}
	if n := f.conns.Load(); n != 1 {
		t.Fatalf("%d connections for two runs, want 1", n)
	}
}
