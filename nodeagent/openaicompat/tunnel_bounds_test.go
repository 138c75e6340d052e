package openaicompat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestTunnelNeverForwardsClientCredentials(t *testing.T) {
	seen := make(chan http.Header, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	})
	cfg := testConfig(srv.URL)
	// An Azure-style deployment: the node's key travels as api-key.
	cfg.Headers = map[string]string{"Api-Key": "node-azure-key"}
	in := newTestInstance(t, TypeOpenAICompat, cfg)
	err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{
		Method: http.MethodGet,
		Path:   "/models",
		Headers: []*iop.Header{
			{Name: "authorization", Value: "Bearer caller-secret"},
			{Name: "api-key", Value: "caller-secret"},
			{Name: "X-API-KEY", Value: "caller-secret"},
			{Name: "Cookie", Value: "session=caller-secret"},
			{Name: "Proxy-Authorization", Value: "Basic caller-secret"},
			{Name: "X-Forwarded-For", Value: "203.0.113.7"},
			{Name: "x-forwarded-host", Value: "api.example.com"},
			{Name: "Forwarded", Value: "for=203.0.113.7"},
			{Name: "X-Real-IP", Value: "203.0.113.7"},
			{Name: "X-Request-Id", Value: "req-1"},
			{Name: "OpenAI-Beta", Value: "assistants=v2"},
		},
	}, &fakeTunnelSink{})
	if err != nil {
		t.Fatalf("tunnel: %v", err)
	}
	h := <-seen
	if got := h.Values("Authorization"); len(got) != 1 || got[0] != "Bearer sk-node-local" {
		t.Errorf("Authorization %q, want only the node's key", got)
	}
	if got := h.Values("Api-Key"); len(got) != 1 || got[0] != "node-azure-key" {
		t.Errorf("Api-Key %q, want only the node's configured value", got)
	}
	for _, name := range []string{"X-Api-Key", "Cookie", "Proxy-Authorization", "X-Forwarded-For", "X-Forwarded-Host", "Forwarded", "X-Real-Ip"} {
		if v := h.Values(name); len(v) > 0 {
			t.Errorf("%s forwarded: %q", name, v)
		}
	}
	for _, v := range h {
		for _, s := range v {
			if strings.Contains(s, "caller-secret") || strings.Contains(s, "203.0.113.7") {
				t.Errorf("client value reached the upstream: %v", h)
			}
		}
	}
	if h.Get("X-Request-Id") != "req-1" || h.Get("Openai-Beta") != "assistants=v2" {
		t.Errorf("ordinary headers lost: %v", h)
	}
}

func TestTunnelResponseHeaderBounds(t *testing.T) {
	cases := []struct {
		name string
		set  func(http.Header)
		ok   bool
	}{
		{"64 headers", func(h http.Header) {
			for i := range maxRelayHeaders - 3 { // plus Content-Type, Content-Length and Date
				h.Set(fmt.Sprintf("X-H%d", i), "v")
			}
		}, true},
		{"65 headers", func(h http.Header) {
			for i := range maxRelayHeaders - 2 {
				h.Set(fmt.Sprintf("X-H%d", i), "v")
			}
		}, false},
		{"65 values of one header", func(h http.Header) {
			for range maxRelayHeaders {
				h.Add("Set-Cookie", "a=b")
			}
		}, false},
		{"15 KiB", func(h http.Header) { h.Set("X-Big", strings.Repeat("a", 15<<10)) }, true},
		{"17 KiB", func(h http.Header) { h.Set("X-Big", strings.Repeat("a", 17<<10)) }, false},
		{"900 KB", func(h http.Header) {
			for i := range 9 {
				h.Set(fmt.Sprintf("X-Big%d", i), strings.Repeat("a", 100_000))
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				tc.set(w.Header())
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
			})
			in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
			sink := &fakeTunnelSink{}
			err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: http.MethodGet, Path: "/models"}, sink)
			if tc.ok {
				if err != nil || sink.status != 200 {
					t.Fatalf("err %v status %d", err, sink.status)
				}
				return
			}
			ae := asAdapterError(t, err)
			if ae.Code != adapter.CodeUpstream || len(sink.calls) != 0 {
				t.Fatalf("error %+v, sink calls %v", ae, sink.calls)
			}
			if tc.name != "900 KB" && (ae.Message != "The provider's response headers exceed the relay's bounds." || !errors.Is(err, errHeadersTooLarge)) {
				t.Fatalf("error %+v", ae)
			}
		})
	}
}
