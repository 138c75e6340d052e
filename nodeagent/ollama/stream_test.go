package ollama

import (
	"context"
	"errors"
	"github.com/iop-gateway/iop/internal/testinput"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestErrorLineMidStream(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineThe, chatLineSky, lineError))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	_, deltas, err := runChat(t, inst, simpleChat)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || ae.Message != "an error was encountered while running the model" {
		t.Fatalf("err = %#v", err)
	}
	if !slices.Equal(deltas, []string{"The", " sky"}) {
		t.Fatalf("deltas before the error = %q", deltas)
	}
}

func TestHTTPErrors(t *testing.T) {
	cases := []struct {
		name    string
		h       http.HandlerFunc
		code    iop.ErrorCode
		status  int
		message string
	}{
		{"model not found", jsonStatus(http.StatusNotFound, `{"error":"model \"nope\" not found, try pulling it first"}`),
			adapter.CodeUpstream, 404, `model "nope" not found, try pulling it first`},
		{"bad request", jsonStatus(http.StatusBadRequest, `{"error":"invalid options: num_predict"}`),
			adapter.CodeInvalidRequest, 400, "invalid options: num_predict"},
		{"server error without json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
		}, adapter.CodeUpstream, 502, "ollama returned HTTP 502"},
		{"proxy error object", jsonStatus(http.StatusTooManyRequests, `{"error":{"message":"slow down","type":"rate_limit"}}`),
			adapter.CodeUpstream, 429, "slow down"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/chat", c.h)
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			_, deltas, err := runChat(t, inst, simpleChat)
			var ae *adapter.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *adapter.Error", err)
			}
			if ae.Code != c.code || ae.HTTPStatus != c.status || ae.Message != c.message {
				t.Fatalf("got code %q status %d message %q", ae.Code, ae.HTTPStatus, ae.Message)
			}
			if len(deltas) != 0 {
				t.Fatalf("deltas = %q", deltas)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	f := newFake(t)
	url := f.URL
	f.Close()
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: url})
	_, _, err := runChat(t, inst, simpleChat)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || ae.HTTPStatus != 0 {
		t.Fatalf("err = %v", err)
	}
}

func TestStreamProtocolErrors(t *testing.T) {
	cases := []struct {
		name     string
		h        http.HandlerFunc
		sentinel error
	}{
		{"truncated", ndjson(chatLineThe), ErrStreamTruncated},
		{"malformed", ndjson(chatLineThe, `{"model":"llama3.2","message":`), ErrMalformedLine},
		{"not an object", ndjson(`data: {"choices":[]}`), ErrMalformedLine},
		{"line too long", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, chatLineThe+"\n")
			_, _ = io.WriteString(w, `{"model":"x","message":{"role":"assistant","content":"`)
			_, _ = io.WriteString(w, strings.Repeat("a", MaxLineBytes))
			_, _ = io.WriteString(w, `"},"done":false}`+"\n")
		}, ErrLineTooLong},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/chat", c.h)
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			_, _, err := runChat(t, inst, simpleChat)
			var ae *adapter.Error
			if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || !errors.Is(err, c.sentinel) {
				t.Fatalf("err = %v, want upstream_error wrapping %v", err, c.sentinel)
			}
		})
	}
}

func TestBlankAndCRLFLinesTolerated(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, "\n"+chatLineThe+"\r\n\r\n"+chatLineFinal+"\r\n")
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	res, deltas, err := runChat(t, inst, simpleChat)
	if err != nil || !slices.Equal(deltas, []string{"The"}) || res.Usage.PromptTokens != 26 {
		t.Fatalf("res = %v, deltas = %q, err = %v", res, deltas, err)
	}
}

// blockingStream writes one line, then holds the response open until the
// client goes away, reporting that on gone.
func blockingStream(gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, chatLineThe+"\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(30 * time.Second):
		}
	}
}

func TestCancelMidStreamAbortsUpstream(t *testing.T) {
	gone := make(chan struct{})
	f := newFake(t)
	f.handle("/api/chat", blockingStream(gone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newSink()
	done := make(chan error, 1)
	go func() {
		_, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(simpleChat)}, sink)
		done <- err
	}()
	select {
	case <-sink.first:
	case <-time.After(5 * time.Second):
		t.Fatal("first delta never arrived")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Run did not return within 1s of cancel")
	}
	select {
	case <-gone:
	case <-time.After(time.Second):
		t.Fatal("upstream request was not aborted within 1s")
	}
}

func TestSinkFailureAbortsUpstream(t *testing.T) {
	gone := make(chan struct{})
	f := newFake(t)
	f.handle("/api/chat", blockingStream(gone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	sink := newSink()
	sink.err = errors.New("run stream closed")
	_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(simpleChat)}, sink)
	if !errors.Is(err, sink.err) {
		t.Fatalf("err = %v", err)
	}
	select {
	case <-gone:
	case <-time.After(time.Second):
		t.Fatal("upstream request was not aborted within 1s")
	}
}

func TestRunTimeout(t *testing.T) {
	gone := make(chan struct{})
	f := newFake(t)
	f.handle("/api/chat", blockingStream(gone))
	// The request's timeout (1s) wins over the config's (1h).
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, TimeoutSec: 3600})
	done := make(chan error, 1)
	go func() {
		_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(simpleChat), TimeoutSec: 1}, newSink())
		done <- err
	}()
	select {
	case err := <-done:
		var ae *adapter.Error
		if !errors.As(err, &ae) || ae.Code != adapter.CodeTimeout || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run ignored timeout_sec")
	}
	select {
	case <-gone:
	case <-time.After(time.Second):
		t.Fatal("upstream request was not aborted after the timeout")
	}
}

func TestCallerDeadlineIsNotAdapterTimeout(t *testing.T) {
	gone := make(chan struct{})
	f := newFake(t)
	f.handle("/api/chat", blockingStream(gone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(simpleChat)}, newSink())
	var ae *adapter.Error
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ae) {
		t.Fatalf("err = %v, want the caller's ctx error, not an adapter.Error", err)
	}
}

func TestCompletion(t *testing.T) {
	f := newFake(t)
	f.handle("/api/generate", ndjson(genLineThat, genLineQ, genLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	sink := newSink()
	res, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpCompletion, Target: "gemma3",
		Input: testinput.For(adapter.OpCompletion, `{"prompt":["Why is the sky blue?"],"suffix":"END","max_tokens":3,"stop":["\n"],"temperature":0}`),
	}, sink)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.got(); !slices.Equal(got, []string{"That", " question", "!"}) {
		t.Fatalf("deltas = %q", got)
	}
	if res.FinishReason != "length" || res.Usage.PromptTokens != 26 || res.Usage.CompletionTokens != 259 {
		t.Fatalf("res = %+v usage %v", res, res.Usage)
	}
	req := f.request(t)
	if req.path != "/api/generate" {
		t.Fatalf("path %s", req.path)
	}
	wantJSON(t, "body", decodeBody(t, req.body), `{"model":"gemma3","prompt":"Why is the sky blue?","suffix":"END","stream":true,
		"options":{"num_predict":3,"stop":["\n"],"temperature":0}}`)

}

func TestUnsupported(t *testing.T) {
	inst := newInstance(t, &iop.AdapterConfig{})
	_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: iop.RunOperation(99), Target: "x"}, newSink())
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUnsupported || !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("err = %v", err)
	}
	if err := inst.Tunnel(context.Background(), &iop.ProviderTunnelRequest{}, nil); !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("Tunnel: %v", err)
	}
}

func TestConnectionDroppedMidStream(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, chatLineThe+"\n")
		w.(http.Flusher).Flush()
		// Ollama crashing: the connection closes without the chunked end.
		panic(http.ErrAbortHandler)
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, deltas, err := runChat(t, inst, simpleChat)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(deltas, []string{"The"}) {
		t.Fatalf("deltas = %q", deltas)
	}
}
