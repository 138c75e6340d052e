package ollama

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testhttp"
	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An error body longer than what is read for its message is drained, so
// its connection serves the next request (before, it was closed). The
// drain's bound is exact: maxErrorBody+maxErrorDrain bytes keep the
// connection, one byte more costs it.
func TestErrorBodyDrainedConnectionReused(t *testing.T) {
	// Chunked, as Ollama (gin) writes a long error.
	chunked := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"`+strings.Repeat("x", maxErrorBody)+`"}`)
	}
	for _, c := range testhttp.DrainCases(t, maxErrorBody, maxErrorDrain, chunked) {
		t.Run(c.Name, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/chat", c.Page)
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			var ae *adapter.Error
			if _, _, err := runChat(t, inst, simpleChat); !errors.As(err, &ae) || ae.HTTPStatus < 500 {
				t.Fatalf("err = %v, want the upstream's error", err)
			}
			f.request(t)
			f.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
			if _, _, err := runChat(t, inst, simpleChat); err != nil {
				t.Fatal(err)
			}
			if n := f.conns.Load(); n != c.Conns {
				t.Fatalf("%d connections for two requests, want %d", n, c.Conns)
			}
		})
	}
}

// An error body that does not end is read to maxErrorBody+maxErrorDrain at
// most, and one that stalls is left after errorDrainTime: the run gets its
// error either way, whatever its own deadline (none here).
func TestErrorBodyDrainBounded(t *testing.T) {
	t.Run("endless", func(t *testing.T) {
		f := newFake(t)
		f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			pad := strings.Repeat(" ", 32<<10)
			for {
				if _, err := io.WriteString(w, pad); err != nil {
					return // the client stopped reading
				}
			}
		})
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
		var read atomic.Int64
		wrapBodies(inst, func(body io.ReadCloser) io.ReadCloser { return &countingBody{ReadCloser: body, n: &read} })
		if err := runWithin(t, inst); err == nil {
			t.Fatal("no error")
		}
		if n := read.Load(); n > maxErrorBody+maxErrorDrain {
			t.Fatalf("%d bytes read of the error body, want at most %d", n, maxErrorBody+maxErrorDrain)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		f := newFake(t)
		f.handle("/api/chat", holdEnd(http.StatusBadGateway, strings.Repeat(" ", maxErrorBody+1)))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
		if err := runWithin(t, inst); err == nil {
			t.Fatal("no error")
		}
	})
}

// runWithin runs a chat with no deadline of its own and fails the test if
// the run has not returned within 5 s (a drain waiting on the peer).
func runWithin(t *testing.T, inst *Instance) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { // Owner: this test; stops with the run, cancelled on return.
		_, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(simpleChat)}, newSink())
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("the run is still draining the error body")
		return nil
	}
}
