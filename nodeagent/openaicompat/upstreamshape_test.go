package openaicompat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A usage key spelled with an escaped long s ("u\u017fage", which
// encoding/json matches to usage) after a null one is still a usage the
// pre-check lets through.
func TestMayHaveUsageEscapedLongS(t *testing.T) {
	data := `{"choices":[],"usage":null,"u\u017fage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	if sseUsage([]byte(data)) == nil {
		t.Fatal("sseUsage found no usage: the case does not test the pre-check")
	}
	if !mayHaveUsage([]byte("data: " + data + "\n\n")) {
		t.Fatal("mayHaveUsage ruled out a chunk whose usage sseUsage reads")
	}
}

// Model entries without an id are not listed as models.
func TestModelsSkipEmptyIDs(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"","object":"model"},{"id":"Qwen/Qwen2.5-7B-Instruct","object":"model"},{"object":"model"}]}`))
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	ids, err := in.Models(context.Background())
	if err != nil || !slices.Equal(ids, []string{"Qwen/Qwen2.5-7B-Instruct"}) {
		t.Fatalf("Models = %q, %v", ids, err)
	}
}

// A streamed run asks for an event stream, an embeddings run for JSON
// (servers and proxies that negotiate on Accept answer accordingly).
func TestRunAcceptHeaders(t *testing.T) {
	accept := make(chan string, 2)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		accept <- r.Header.Get("Accept")
		if r.URL.Path == "/v1/embeddings" {
			_, _ = w.Write([]byte(`{"data":[{"index":0,"embedding":[0.5]}]}`))
			return
		}
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"content":"ok"}`, "stop"))
		sseWrite(t, w, vllmDone)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	if _, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`)}, &fakeRunSink{}); err != nil {
		t.Fatalf("chat: %v", err)
	}
	if got := <-accept; got != "text/event-stream" {
		t.Fatalf("chat Accept %q", got)
	}
	if _, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpEmbedding,
		Input: testinput.For(adapter.OpEmbedding, `{"input":["a"]}`)}, &fakeRunSink{}); err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	if got := <-accept; got != "application/json" {
		t.Fatalf("embeddings Accept %q", got)
	}
}

// An upstream message is cut at maxErrorMessage bytes: one byte over is
// cut (and marked), exactly that many is kept whole.
func TestUpstreamMessageBound(t *testing.T) {
	for _, n := range []int{maxErrorMessage, maxErrorMessage + 1} {
		msg := strings.Repeat("x", n)
		got := parseUpstreamError(400, []byte(`{"error":{"message":"`+msg+`"}}`)).message
		want := msg
		if n > maxErrorMessage {
			want = msg[:maxErrorMessage] + "…"
		}
		if got != want {
			t.Fatalf("%d-byte message became %d bytes %q…", n, len(got), got[max(0, len(got)-8):])
		}
	}
}

// A caller's cancellation is reported as that, never as the adapter's own
// timeout (which the edge would answer as 504 and count as a failure).
func TestCallerCancelIsNotATimeout(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server notices the node's close
		arrived <- struct{}{}
		<-r.Context().Done() // no answer until the node gives up
	})
	cfg := testConfig(srv.URL)
	cfg.TimeoutSec = 60
	in := newTestInstance(t, TypeVLLM, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // Owner: this test; ends once the request reached the server (or after 5 s).
		defer cancel()
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
		}
	}()
	_, err := in.Run(ctx, &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", false)}, &fakeRunSink{})
	var ae *adapter.Error
	if !errors.Is(err, context.Canceled) || errors.As(err, &ae) {
		t.Fatalf("err = %v, want the caller's cancellation, not an adapter error", err)
	}
}
