package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestTunnelJSONPassthrough(t *testing.T) {
	const respBody = `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":9,"total_tokens":11,"completion_tokens":2,"prompt_tokens_details":null},"prompt_logprobs":null}`
	const reqBody = `{"model":"Qwen/Qwen2.5-7B-Instruct","messages":[{"role":"user","content":"Hi"}]}`
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.RequestURI() != "/v1/chat/completions?trace=1" {
			t.Errorf("request %s %s", r.Method, r.URL.RequestURI())
		}
		if got := r.Header.Get("Authorization"); got != "Bearer sk-node-local" {
			t.Errorf("Authorization %q, want the node-local key", got)
		}
		if r.Header.Get("X-Drop-Me") != "" || r.Header.Get("Keep-Alive") != "" || r.Header.Get("Accept-Encoding") != "" {
			t.Errorf("hop-by-hop headers forwarded: %v", r.Header)
		}
		if r.Header.Get("X-Tenant") != "acme" || r.Header.Get("X-Request-Id") != "req-1" {
			t.Errorf("headers missing: %v", r.Header)
		}
		b, _ := io.ReadAll(r.Body)
		if string(b) != reqBody {
			t.Errorf("body altered: %s", b)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "vllm")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, respBody)
	})
	cfg := testConfig(srv.URL)
	cfg.Headers = map[string]string{"X-Tenant": "acme"}
	in := newTestInstance(t, TypeOpenAICompat, cfg)

	sink := &fakeTunnelSink{}
	err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{
		Method: http.MethodPost,
		Path:   "/chat/completions?trace=1",
		Headers: []*iop.Header{
			{Name: "Content-Type", Value: "application/json"},
			{Name: "Authorization", Value: "Bearer caller-key"},
			{Name: "Connection", Value: "X-Drop-Me"},
			{Name: "X-Drop-Me", Value: "1"},
			{Name: "Keep-Alive", Value: "timeout=5"},
			{Name: "X-Request-Id", Value: "req-1"},
			{Name: "Accept-Encoding", Value: "gzip"},
		},
		Body: []byte(reqBody),
	}, sink)
	if err != nil {
		t.Fatalf("tunnel: %v", err)
	}
	if sink.status != http.StatusOK || sink.header.Get("X-Upstream") != "vllm" || sink.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d headers %v", sink.status, sink.header)
	}
	if got := sink.body(); string(got) != respBody {
		t.Fatalf("body altered:\n%s", got)
	}
	if len(sink.usages) != 1 || sink.usages[0].GetPromptTokens() != 9 || sink.usages[0].GetCompletionTokens() != 2 || sink.usages[0].GetTotalTokens() != 11 {
		t.Fatalf("usage %v", sink.usages)
	}
	if sink.calls[0] != "status" || sink.calls[len(sink.calls)-1] != "usage" {
		t.Fatalf("call order %v", sink.calls)
	}
}

func TestTunnelSSESplitsAtEventBoundaries(t *testing.T) {
	events := []string{
		vllmChunk(`{"role":"assistant","content":""}`, ""),
		vllmChunk(`{"content":"Hel"}`, ""),
		vllmChunk(`{"content":"lo"}`, ""),
		vllmChunk(`{"content":""}`, "stop"),
		vllmUsageChunk(7, 3),
		vllmDone,
	}
	full := strings.Join(events, "")
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		// Awkward write boundaries: mid-line, mid-terminator, several events.
		cuts := []int{10, len(events[0]) - 1, len(events[0]) + 1, len(events[0]) + len(events[1]) + len(events[2]) + 5}
		prev := 0
		for _, c := range cuts {
			sseWrite(t, w, full[prev:c])
			prev = c
		}
		sseWrite(t, w, full[prev:])
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	sink := &fakeTunnelSink{}
	err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "POST", Path: "/chat/completions", Body: []byte(`{"stream":true}`), Stream: true}, sink)
	if err != nil {
		t.Fatalf("tunnel: %v", err)
	}
	if got := string(sink.body()); got != full {
		t.Fatalf("body altered:\n%q\nwant\n%q", got, full)
	}
	for i, c := range sink.chunks {
		if !bytes.HasSuffix(c, []byte("\n\n")) {
			t.Fatalf("chunk %d does not end at an event boundary: %q", i, c)
		}
	}
	if len(sink.usages) != 1 || sink.usages[0].GetTotalTokens() != 10 {
		t.Fatalf("usage %v", sink.usages)
	}
}

func TestTunnelSSEContinuousUsageReportedOnce(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		// stream_options.continuous_usage_stats: every chunk carries the
		// running total.
		for i, c := range []string{"a", "b", "c"} {
			sseWrite(t, w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`+c+`"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":`+string(rune('6'+i))+`,"completion_tokens":`+string(rune('1'+i))+`}}`+"\n\n")
		}
		sseWrite(t, w, vllmDone)
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	sink := &fakeTunnelSink{}
	if err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "POST", Path: "/chat/completions"}, sink); err != nil {
		t.Fatal(err)
	}
	if len(sink.usages) != 1 || sink.usages[0].GetCompletionTokens() != 3 || sink.usages[0].GetTotalTokens() != 8 {
		t.Fatalf("usages %v", sink.usages)
	}
}

// deliveredBeforePause checks that first, written by the upstream before a
// pause, reaches the sink (as the whole of the first body chunk) before
// the pause ends: the relay holds no event back waiting for more data.
func deliveredBeforePause(t *testing.T, first string) {
	t.Helper()
	pauseOver := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, first)
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		close(pauseOver)
		sseWrite(t, w, vllmChunk(`{"content":"second"}`, "stop")+vllmDone)
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	sink := &fakeTunnelSink{bodyCh: make(chan []byte, 16)}
	done := make(chan error, 1)
	go func() {
		done <- in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "POST", Path: "/chat/completions"}, sink)
	}()
	select {
	case got := <-sink.bodyCh:
		if string(got) != first {
			t.Fatalf("first chunk is %q (%d bytes), want the first event (%d bytes)", got, len(got), len(first))
		}
		select {
		case <-pauseOver:
			t.Fatal("first event was delivered only after the upstream pause ended")
		default:
		}
	case <-pauseOver:
		t.Fatal("upstream pause ended before the first event reached the sink")
	case err := <-done:
		t.Fatalf("tunnel ended early: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("tunnel: %v", err)
	}
}

func TestTunnelSSEDeliversEventBeforePause(t *testing.T) {
	deliveredBeforePause(t, vllmChunk(`{"content":"first"}`, ""))
}

// sseEvent is one event of exactly n bytes ("data: xxx…\n\n").
func sseEvent(n int) string {
	return "data: " + strings.Repeat("x", n-len("data: \n\n")) + "\n\n"
}

// An event that exactly fills the relay's small wait read is emitted before
// the relay reads again: that read blocks until the upstream's next event.
func TestTunnelSSEEventFillingTheWaitReadIsNotHeld(t *testing.T) {
	deliveredBeforePause(t, sseEvent(sseWaitSize))
}

// Bursts larger than the small read (several events in one write, one event
// larger than the burst buffer) arrive intact and cut at event boundaries.
func TestTunnelSSEBursts(t *testing.T) {
	var writes []string
	var full strings.Builder
	for _, sizes := range [][]int{
		{sseWaitSize - 1, 9},                // the small read ends one byte into the second event
		{300, 300, 300, 300, 300, 300},      // a batch of ordinary chunks
		{sseBurstSize + 700},                // one event larger than the burst buffer
		{sseWaitSize, sseWaitSize, 3 << 10}, // full small read, then more
	} {
		var w strings.Builder
		for _, n := range sizes {
			w.WriteString(sseEvent(n))
		}
		writes = append(writes, w.String())
		full.WriteString(w.String())
	}
	writes = append(writes, vllmDone)
	full.WriteString(vllmDone)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		for _, s := range writes {
			sseWrite(t, w, s)
		}
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	sink := &fakeTunnelSink{}
	if err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "POST", Path: "/chat/completions", Stream: true}, sink); err != nil {
		t.Fatalf("tunnel: %v", err)
	}
	if got := string(sink.body()); got != full.String() {
		t.Fatalf("body altered: %d bytes, want %d", len(got), full.Len())
	}
	for i, c := range sink.chunks {
		if !bytes.HasSuffix(c, []byte("\n\n")) {
			t.Fatalf("chunk %d does not end at an event boundary: %q", i, c)
		}
	}
}

func TestTunnelUpstreamErrorPassthrough(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, vllmToolChoiceError)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	sink := &fakeTunnelSink{}
	err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "POST", Path: "/chat/completions", Body: []byte(`{}`)}, sink)
	if err != nil {
		t.Fatalf("a 4xx is passed through, not an error: %v", err)
	}
	if sink.status != http.StatusBadRequest || string(sink.body()) != vllmToolChoiceError {
		t.Fatalf("status %d body %s", sink.status, sink.body())
	}
}

func TestTunnelCancelAbortsUpstream(t *testing.T) {
	upstreamSawCancel := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"content":"tick"}`, ""))
		select {
		case <-r.Context().Done():
			close(upstreamSawCancel)
		case <-time.After(10 * time.Second):
		}
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &fakeTunnelSink{bodyCh: make(chan []byte, 16)}
	done := make(chan error, 1)
	go func() {
		done <- in.Tunnel(ctx, &iop.ProviderTunnelRequest{Method: "POST", Path: "/chat/completions"}, sink)
	}()
	<-sink.bodyCh
	cancel()
	select {
	case <-upstreamSawCancel:
	case <-time.After(time.Second):
		t.Fatal("upstream did not see the cancellation within 1s")
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v does not wrap context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Tunnel did not return after cancellation")
	}
}

func TestTunnelTimeout(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "GET", Path: "/models", TimeoutSec: 1}, &fakeTunnelSink{})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeTimeout {
		t.Fatalf("code %q, want timeout", ae.Code)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there any more
	in := newTestInstance(t, TypeOpenAICompat, testConfig("http://"+addr))

	err = in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "GET", Path: "/models"}, &fakeTunnelSink{})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeUpstream || ae.Err == nil {
		t.Fatalf("tunnel: %+v", ae)
	}
	_, err = in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: &iop.RunInput{}}, &fakeRunSink{})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeUpstream {
		t.Fatalf("run: %+v", ae)
	}
}

func TestTunnelRejectsEscapingPaths(t *testing.T) {
	in := newTestInstance(t, TypeOpenAICompat, testConfig("http://127.0.0.1:1"))
	for _, p := range []string{"//evil.example/x", "/../admin", "/a/%2e%2e/b", "/x\\y"} {
		err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "GET", Path: p}, &fakeTunnelSink{})
		if ae := asAdapterError(t, err); ae.Code != adapter.CodeInvalidRequest {
			t.Fatalf("path %q: code %q", p, ae.Code)
		}
	}
}

func TestTailBufferUsageOfLargeBody(t *testing.T) {
	tb := &tailBuffer{limit: 256}
	tb.write([]byte(`{"data":[`))
	for range 100 {
		tb.write([]byte(`{"index":0,"embedding":[0.1,0.2,0.3]},`))
	}
	tb.write([]byte(`{"index":1,"embedding":[0.1]}],"usage":{"prompt_tokens":5,"total_tokens":5,"completion_tokens":0}}`))
	u := tb.usage()
	if !tb.truncated || u == nil || u.GetPromptTokens() != 5 || u.GetTotalTokens() != 5 {
		t.Fatalf("truncated=%v usage=%v", tb.truncated, u)
	}
}

// usageByDecode is what tailBuffer.usage did with a whole body before
// usageOfObject: decode all of it.
func usageByDecode(body []byte) *usageJSON {
	var doc struct {
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	return doc.Usage
}

// For any valid JSON document, scanning for the usage finds what decoding
// the whole document does.
func FuzzUsageOfObject(f *testing.F) {
	f.Add(chatCompletionBody)
	for _, s := range []string{
		`{"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"a":{"usage":{"prompt_tokens":9}},"b":["usage",{"usage":1}],"usage":{"prompt_tokens":3,"total_tokens":4}}`,
		`{"Usage":{"prompt_tokens":1},"USAGE":{"completion_tokens":2}}`,
		`{"usage":{"prompt_tokens":1,"completion_tokens":2},"usage":{"prompt_tokens":5}}`,
		`{"usage":{"prompt_tokens":1},"usage":null}`, `{"usage":null,"usage":{"prompt_tokens":7}}`,
		`{"u\u0073age":{"prompt_tokens":1}}`, `{"uſage":{"prompt_tokens":1}}`, `{"usage\\":{"prompt_tokens":1}}`,
		`{"x":"\"usage\":{\"prompt_tokens\":1}","usage":{"prompt_tokens":2}}`,
		`{"usage":{"prompt_tokens":"1"}}`, `{"usage":{"prompt_tokens":1.5}}`, `{"usage":5}`, `{"usage":[]}`,
		`{"usage":{"Prompt_Tokens":3,"extra":{"a":[1,{}]}}}`, `{"usage":{}}`, `{}`, `[]`, `null`, `"usage"`, `1`,
		` { "usage" : { "prompt_tokens" : 1 } , "z" : [ ] } `, "{\"usage\":{\"prompt_tokens\":1}}\n",
		`{"usage":{"prompt_tokens":1}`, `{"usage":{"prompt_tokens":1}}}`, `{"usage":{"prompt_tokens":1}} x`,
		`{"a":[}`, `{"\\":1,"usage":{"prompt_tokens":2}}`, `{"a":"\\\\","usage":{"prompt_tokens":2}}`,
		`{"usage":{"prompt_tokens":99999999999999999999}}`,
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting)))
	f.Add([]byte(`{"a":` + strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting) + `,"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"a":` + strings.Repeat("[", maxNesting-1) + strings.Repeat("]", maxNesting-1) + `,"usage":{"prompt_tokens":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got := usageOfObject(body) // never panics, valid or not
		if !json.Valid(body) {
			return
		}
		if want := usageByDecode(body); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: scan found %+v, decode %+v", body, got, want)
		}
	})
}
