package openaicompat

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testhttp"
	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// countingServer is an httptest server that counts the connections it
// accepted; h answers the first request, ok every later one.
func countingServer(t *testing.T, h, ok http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns, reqs atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if reqs.Add(1) == 1 {
			h(w, r)
			return
		}
		ok(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func answerChat(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
}

func runPlainChat(ctx context.Context, in *Instance) error {
	_, err := in.Run(ctx, &iop.RunRequest{Target: "m", Operation: adapter.OpChat,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`)}, &fakeRunSink{})
	return err
}

// An upstream error body longer than what is read for its message is
// drained, so that its connection serves the next request. The drain's
// bound is exact: maxErrorBody+maxErrorDrain bytes keep the connection,
// one byte more costs it.
func TestUpstreamErrorBodyDrainedConnectionReused(t *testing.T) {
	// Chunked, as vLLM writes a long error.
	chunked := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"`+strings.Repeat("x", maxErrorBody)+`"}}`)
	}
	for _, c := range testhttp.DrainCases(t, maxErrorBody, maxErrorDrain, chunked) {
		t.Run(c.Name, func(t *testing.T) {
			srv, conns := countingServer(t, c.Page, answerChat)
			in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
			var ae *adapter.Error
			if err := runPlainChat(context.Background(), in); !errors.As(err, &ae) || ae.HTTPStatus < 500 {
				t.Fatalf("err = %v, want the upstream's error", err)
			}
			if err := runPlainChat(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			if n := conns.Load(); n != c.Conns {
				t.Fatalf("%d connections for two requests, want %d", n, c.Conns)
			}
		})
	}
}

// An endless error body is read to maxErrorBody+maxErrorDrain at most, and
// a stalled one is left after errorDrainTime; the run gets its error
// either way, with no deadline of its own.
func TestUpstreamErrorBodyDrainBounded(t *testing.T) {
	var written atomic.Int64
	endless := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		pad := strings.Repeat(" ", 32<<10)
		for {
			n, err := io.WriteString(w, pad)
			written.Add(int64(n))
			if err != nil {
				return // the client closed the connection
			}
		}
	}
	stalled := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, strings.Repeat(" ", maxErrorBody+1))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	for name, h := range map[string]http.HandlerFunc{"endless": endless, "stalled": stalled} {
		t.Run(name, func(t *testing.T) {
			srv, _ := countingServer(t, h, answerChat)
			in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
			done := make(chan error, 1)
			go func() { done <- runPlainChat(context.Background(), in) }() // Owner: this test; ends with the drain's bound.
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("no error")
				}
				// What the server could write: what was read, plus the
				// socket buffers (generous); an unbounded drain reads
				// hundreds of MiB in errorDrainTime.
				if n := written.Load(); n > maxErrorBody+maxErrorDrain+16<<20 {
					t.Fatalf("%d bytes written of the error body, want the drain bounded", n)
				}
			case <-time.After(10 * time.Second):
				srv.CloseClientConnections() // for the run to end
				t.Fatal("the run is still draining the error body")
			}
		})
	}
}
