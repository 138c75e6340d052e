package openaicompat

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A hop-by-hop header, or one Connection nominates, spelt other than
// canonically (a hand-built header map) is dropped by its canonical name,
// never moved to its canonical spelling and kept. The map is filtered
// while ranged over, and whether a key added then is visited is up to
// the runtime: the test repeats so that a name moved, not dropped, shows.
func TestResponseHeadersDropNonCanonicalHops41m(t *testing.T) {
	for range 200 {
		h := http.Header{
			"Connection":   {"x-hop"},
			"keep-alive":   {"timeout=5"},
			"x-hop":        {"1"},
			"content-type": {"application/json"},
		}
		got := responseHeaders(h)
		want := http.Header{"Content-Type": {"application/json"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("responseHeaders = %v, want %v", got, want)
		}
	}
}

// A run goes through the instance's own transport, whose bound on the
// response head holds: an answer with 1 MiB of headers fails the run as
// an upstream error (http.DefaultTransport would take 10 MiB).
func TestRunResponseHeadersBounded41m(t *testing.T) {
	pad := strings.Repeat("p", 8<<10)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 128 {
			w.Header().Set("X-Pad-"+strconv.Itoa(i), pad)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	_, err := in.Run(context.Background(), &iop.RunRequest{
		Target: "m", Operation: adapter.OpChat,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"Hi"}]}`),
	}, &fakeRunSink{})
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream {
		t.Fatalf("a run answered with 1 MiB of headers: %v, want an upstream error", err)
	}
}
