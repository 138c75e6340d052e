package ollama

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// holdEnd answers with status and body, flushed, and holds the body's end
// until the client gives up the request: an answer whose object a client
// can read whole while the exchange is still under way.
func holdEnd(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// cancelOnceRead makes inst call cancel (ending ctx) once n bytes of the
// first answer it reads have been read.
func cancelOnceRead(ctx context.Context, inst *Instance, n int, cancel context.CancelFunc) {
	var first atomic.Bool
	reached := make(chan struct{}, 1)
	wrapBodies(inst, func(body io.ReadCloser) io.ReadCloser {
		if !first.CompareAndSwap(false, true) {
			return body
		}
		return &signalAt{ReadCloser: body, left: n, reached: reached}
	})
	go func() { // Owner: the test; stops once n bytes were read or ctx ended.
		select {
		case <-reached:
			cancel()
		case <-ctx.Done():
		}
	}()
}

// A lookup whose answer was read whole just as its run was cancelled (the
// cancellation cut only the body's end) is remembered: the next run sends
// no second /api/show and goes straight to the text form. Before, the
// answer was thrown away with the run.
func TestTextToolsAnswerKeptWhenItsRunIsCancelled(t *testing.T) {
	for name, c := range map[string]struct {
		show       http.HandlerFunc
		n          int
		chat       http.HandlerFunc
		wantNative bool
		chatStatus int // of the next run's chat; 0: it succeeds
	}{
		"capabilities": {holdEnd(http.StatusOK, showNoTools), len(showNoTools), ndjson(textCallLines...), false, 0},
		"model not found": {holdEnd(http.StatusNotFound, `{"error":"model 'gemma:2b' not found"}`), len(`{"error":"model 'gemma:2b' not found"}`),
			jsonStatus(http.StatusNotFound, `{"error":"model \"gemma:2b\" not found, try pulling it first"}`), true, http.StatusNotFound},
		// An Ollama older than capabilities: native, for toolSupportTTL.
		"no capabilities": {holdEnd(http.StatusOK, showNoCapabilities), len(showNoCapabilities), ndjson(chatLineThe, chatLineFinal), true, 0},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/show", c.show)
			f.handle("/api/chat", c.chat)
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			setToolLookupTimeout(t, time.Minute) // the lookup ends by the cancellation alone
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cancelOnceRead(ctx, inst, c.n, cancel)
			shows := countShows(inst)
			_, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Target: "gemma:2b", Input: testinput.Chat(toolChat)}, newSink())
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want the run's cancellation", err)
			}
			f.show(t)
			e, ok := entryOf(inst, "gemma:2b")
			if !ok || e.native != c.wantNative {
				t.Fatalf("entry %+v (%v), want the answer remembered (native %v)", e, ok, c.wantNative)
			}
			_, _, err = runTarget(t, inst, "gemma:2b", toolChat)
			if ae := (*adapter.Error)(nil); c.chatStatus != 0 && (!errors.As(err, &ae) || ae.HTTPStatus != c.chatStatus) {
				t.Fatalf("err = %v, want Ollama's %d to the chat", err, c.chatStatus)
			} else if c.chatStatus == 0 && err != nil {
				t.Fatal(err)
			}
			if body := f.request(t).body; !c.wantNative {
				wantTextForm(t, body)
			} else if _, ok := decodeBody(t, body)["tools"]; !ok {
				t.Fatal("tools not sent natively")
			}
			if n := shows.Load(); n != 1 {
				t.Fatalf("%d lookups, want the cancelled run's alone", n)
			}
		})
	}
}
