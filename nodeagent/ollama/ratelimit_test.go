package ollama

import (
	"errors"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestRateLimitKeepsRetryAfter(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		body       string
		wantSec    int
		wantMsg    string
	}{
		// Ollama's own answer when OLLAMA_MAX_QUEUE is exceeded.
		{503, "4", `{"error":"server busy, please try again.  maximum pending requests exceeded"}`, 4, "server busy, please try again.  maximum pending requests exceeded"},
		{503, "", `{"error":"server busy, please try again.  maximum pending requests exceeded"}`, 0, "server busy, please try again.  maximum pending requests exceeded"},
		// A rate-limiting proxy in front of Ollama.
		{429, "12", `{"error":"too many requests"}`, 12, "too many requests"},
		{429, "", "Too Many Requests\n", 0, "ollama returned HTTP 429"},
	}
	for _, tc := range cases {
		f := newFake(t)
		f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
			if tc.retryAfter != "" {
				w.Header().Set("Retry-After", tc.retryAfter)
			}
			jsonStatus(tc.status, tc.body)(w, r)
		})
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
		_, _, err := runChat(t, inst, simpleChat)
		var ae *adapter.Error
		if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || ae.HTTPStatus != tc.status ||
			ae.RetryAfterSec != tc.wantSec || ae.Message != tc.wantMsg {
			t.Fatalf("%d %q: err = %+v", tc.status, tc.retryAfter, err)
		}
	}
}

func TestUpstreamCredentialsRejected(t *testing.T) {
	for _, status := range []int{401, 403} {
		f := newFake(t)
		f.handle("/api/chat", jsonStatus(status, `{"error":"unauthorized"}`))
		f.handle("/api/embed", jsonStatus(status, `{"error":"unauthorized"}`))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
		_, _, err := runChat(t, inst, simpleChat)
		_, err2 := runEmbedding(t, inst, `{"input":"x"}`)
		for _, err := range []error{err, err2} {
			var ae *adapter.Error
			if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || ae.HTTPStatus != status || ae.Message != adapter.MsgUpstreamCredentials {
				t.Fatalf("%d: err = %+v", status, err)
			}
		}
	}
}
