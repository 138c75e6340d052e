package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// answering is a fake node handler that answers every tunnel with the
// frames frames(request) returns (sequence and run id filled in), then
// half-closes.
func answering(frames func(req *iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame) func(*fakeNode, context.Context, *nodewire.Stream, *iop.Envelope) {
	return answeringStepping(frames, nil)
}

// answeringStepping is answering that nudges p (if not nil) after each
// frame it sent.
func answeringStepping(frames func(req *iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame, p progress) func(*fakeNode, context.Context, *nodewire.Stream, *iop.Envelope) {
	return func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		n.record(first)
		req := first.GetProviderTunnelRequest()
		for i, f := range frames(req) {
			f.Sequence, f.RunId = uint64(i+1), req.GetRunId()
			if err := st.Send(tunnelFrameEnv(f)); err != nil {
				return
			}
			if p != nil {
				p.step()
			}
		}
		_ = st.CloseWrite()
	}
}

func statusFrame(code int32, headers ...*iop.Header) *iop.ProviderTunnelFrame {
	return &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: code, Headers: headers}
}

func bodyFrame(b string) *iop.ProviderTunnelFrame {
	return &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte(b)}
}

func endFrame() *iop.ProviderTunnelFrame {
	return &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}
}

var jsonType = &iop.Header{Name: "Content-Type", Value: "application/json"}

// A status a node reports outside 100–599 is a 502 envelope, never a
// panic or a relayed "HTTP/1.1 995".
func TestTunnelInvalidStatus(t *testing.T) {
	var status int32
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(status, jsonType), bodyFrame(vllmChatJSON), endFrame()}
	}))
	for _, code := range []int32{1995, 995, 600, 99, 0, -200} {
		status = code // requests are sequential
		for _, body := range []string{
			`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		} {
			r := post(t, e, "/v1/chat/completions", body)
			assertError(t, r, http.StatusBadGateway, "upstream_error")
		}
	}
	status = 599
	if r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`); r.Status != 599 {
		t.Errorf("status 599 relayed as %d", r.Status)
	}
	waitReleased(t, e, "vllm-main")
}

// Response headers from the node are bounded: at most 64, at most 16 KiB
// of names and values.
func TestTunnelResponseHeaderBounds(t *testing.T) {
	var headers []*iop.Header
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(200, headers...), bodyFrame(vllmChatJSON), endFrame()}
	}))
	// n headers whose names and values total size bytes.
	build := func(n, size int) []*iop.Header {
		hs := []*iop.Header{jsonType}
		size -= len("Content-Type") + len("application/json")
		for i := 1; i < n; i++ {
			name := fmt.Sprintf("X-H%02d", i)
			v := "v"
			if i == n-1 {
				v = strings.Repeat("v", size-len(name))
			}
			size -= len(name) + len(v)
			hs = append(hs, &iop.Header{Name: name, Value: v})
		}
		return hs
	}
	chat := `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`

	headers = build(64, 16<<10)
	r := post(t, e, "/v1/chat/completions", chat)
	if r.Status != http.StatusOK || string(r.Body) != vllmChatJSON || len(r.Header.Get("X-H63")) < 10<<10 || r.Header.Get("X-H01") != "v" {
		t.Errorf("64 headers, 16 KiB: %d %.200s", r.Status, r.Body)
	}
	for _, tc := range []struct {
		name string
		hs   []*iop.Header
	}{
		{"65 headers", build(65, 1000)},
		{"16 KiB + 1", build(3, 16<<10+1)},
		{"one 900 KB header", build(2, 900<<10)},
	} {
		headers = tc.hs
		r := post(t, e, "/v1/chat/completions", chat)
		assertError(t, r, http.StatusBadGateway, "upstream_error")
		if r.Header.Get("X-H01") != "" {
			t.Errorf("%s: node headers relayed with the error", tc.name)
		}
	}
	waitReleased(t, e, "vllm-main")
}

// The same through a real node: an upstream's 900 KB header never reaches
// the client.
func TestTunnelHugeUpstreamHeader(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", strings.Repeat("h", 900<<10))
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	s := tunnelStack(t, u)
	r := post(t, s.Edge, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	waitReleased(t, s.Edge, "vllm-main")
}

// Only the allow-listed request headers reach the upstream: client
// credentials, forwarding headers, account headers, SDK telemetry and
// anything unknown stay at the edge.
func TestTunnelRequestHeaderAllowList(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u)
	denied := map[string]string{
		"Authorization":       "Bearer sk-client-secret",
		"Api-Key":             "client-azure-key",
		"X-Api-Key":           "client-anthropic-key",
		"Cookie":              "session=client",
		"Proxy-Authorization": "Basic Y2xpZW50",
		"X-Forwarded-For":     "203.0.113.7",
		"X-Forwarded-Host":    "edge.example",
		"X-Forwarded-Proto":   "https",
		"Forwarded":           "for=203.0.113.7",
		"X-Real-Ip":           "203.0.113.7",
		"Openai-Organization": "org-client",
		"Openai-Project":      "proj-client",
		"X-Stainless-Os":      "Linux",
		"X-Custom":            "unknown",
		"Accept-Encoding":     "br, zstd",
		"Te":                  "trailers",
		"Traceparent":         "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	allowed := map[string]string{
		"Accept":      "application/json",
		"User-Agent":  "OpenAI/Python 1.50.0",
		"Openai-Beta": "assistants=v2",
	}
	hdr := map[string]string{}
	for k, v := range denied {
		hdr[k] = v
	}
	for k, v := range allowed {
		hdr[k] = v
	}
	r := do(t, httpClient(t), http.MethodPost, s.URL+"/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`, hdr)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	up := u.requests()[0].Header
	for k, v := range denied {
		for _, got := range up.Values(k) {
			if got == v || strings.Contains(got, v) {
				t.Errorf("%s: %q reached the upstream", k, got)
			}
		}
	}
	for _, secret := range []string{"sk-client-secret", "client-azure-key", "client-anthropic-key", "203.0.113.7", "org-client"} {
		for k, vs := range up {
			for _, v := range vs {
				if strings.Contains(v, secret) {
					t.Errorf("%q reached the upstream in %s", secret, k)
				}
			}
		}
	}
	for k, v := range allowed {
		if got := up.Get(k); got != v {
			t.Errorf("allowed %s: upstream got %q, want %q", k, got, v)
		}
	}
	if got := up.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	if got := up.Get("Authorization"); got != "Bearer "+upstreamKey {
		t.Errorf("upstream Authorization %q, want the node's key", got)
	}
	waitReleased(t, s.Edge, "vllm-main")
}

// A whole answer cut before its end never reaches the client as a short
// reply: it is a 502 envelope, whether the upstream connection broke or
// the node reported an error after some body.
func TestTunnelWholeAnswerCutShort(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(vllmChatJSON)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(vllmChatJSON[:100]))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the upstream's connection breaks
	})
	s := tunnelStack(t, u)
	r := post(t, s.Edge, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	waitReleased(t, s.Edge, "vllm-main")

	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(200, jsonType), bodyFrame(vllmChatJSON[:100]),
			{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true, Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "read: connection reset"}}}
	}))
	r = post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	if bytes.Contains(r.Body, []byte("chatcmpl")) {
		t.Errorf("part of the body reached the client: %s", r.Body)
	}
	waitReleased(t, e, "vllm-main")
}

// A whole answer is held (with its Content-Length) up to 16 MiB; a larger
// one is relayed as it comes, whole.
func TestTunnelHeldAnswerBound(t *testing.T) {
	const frame = 1 << 20
	var frames int
	// The wait is on the answer's progress (each frame the node sent, each
	// read of the body), not on a fixed window: up to 17 MiB go through
	// the wire, the edge's hold and the client at the machine's pace.
	p := newProgress()
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answeringStepping(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		out := []*iop.ProviderTunnelFrame{statusFrame(200, jsonType)}
		for i := 0; i < frames; i++ {
			out = append(out, bodyFrame(strings.Repeat(string(rune('a'+i%26)), frame)))
		}
		return append(out, endFrame())
	}, p))
	chat := `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`
	for _, n := range []int{16, 17} {
		frames = n
		r := postProgressing(t, e, "/v1/chat/completions", chat, p)
		if r.Status != http.StatusOK || len(r.Body) != n*frame || r.Body[len(r.Body)-1] != byte('a'+(n-1)%26) {
			t.Fatalf("%d MiB: status %d, %d bytes", n, r.Status, len(r.Body))
		}
		cl := r.Header.Get("Content-Length")
		if held := n*frame <= 16<<20; held != (cl == strconv.Itoa(n*frame)) {
			t.Errorf("%d MiB: Content-Length %q (held %v)", n, cl, held)
		}
	}
	waitReleased(t, e, "vllm-main")
}

// Upstream credential failures are the node's, not the client's: 401 and
// 403 become 502 upstream_error; a 429 keeps its status and Retry-After.
func TestTunnelUpstreamAuthAndRateLimit(t *testing.T) {
	var status int
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("WWW-Authenticate", `Bearer realm="upstream"`)
		writeJSON(w, status, `{"error":"Unauthorized"}`)
	})
	s := tunnelStack(t, u)
	for _, st := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		status = st
		for _, body := range []string{
			`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			`{"input":"hi","model":"bge"}`,
		} {
			path := "/v1/chat/completions"
			if strings.Contains(body, "input") {
				path = "/v1/embeddings"
			}
			r := post(t, s.Edge, path, body)
			assertError(t, r, http.StatusBadGateway, "upstream_error")
			if r.Header.Get("Www-Authenticate") != "" {
				t.Errorf("%d: the upstream's WWW-Authenticate reached the client", st)
			}
		}
	}
	status = http.StatusTooManyRequests
	r := post(t, s.Edge, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusTooManyRequests, "upstream_error")
	if r.Header.Get("Retry-After") != "7" {
		t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	waitReleased(t, s.Edge, "vllm-main")
}
