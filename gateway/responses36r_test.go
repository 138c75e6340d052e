package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/iop-gateway/iop/internal/stack"
)

// responsesPairServing is responsesPair with b's answers made by serveB
// from b's own vLLM imitation.
func responsesPairServing(t *testing.T, serveB func(b *vllmResponses, w http.ResponseWriter, r *http.Request)) (e *stack.Edge, a, b *vllmResponses) {
	t.Helper()
	a = newVLLMResponses(t, "a")
	b = &vllmResponses{name: "b", store: map[string]bool{}}
	b.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request) { serveB(b, w, r) })
	e, _, _ = startResponsesPair(t, a, b)
	return e, a, b
}

// A streamed request that its server answers with a whole JSON body (no
// event stream) is relayed as it comes, not held: the body's id, short of
// the scan's bound, is read when the answer ends, and the follow-up
// reaches b.
func TestResponsesJSONAnswerToStreamRemembered36r(t *testing.T) {
	e, a, _ := responsesPairServing(t, func(b *vllmResponses, w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(bytes.Replace(body, []byte(`"stream":true`), []byte(`"stream":false`), 1)))
		b.serve(w, r)
	})
	a.busyNext.Store(true)
	r := post(t, e, "/v1/responses", `{"model":"m","input":"hi","stream":true}`)
	if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"id":"resp_b`)) {
		t.Fatalf("first request: %d %s", r.Status, r.Body)
	}
	var got struct{ ID string }
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("first answer %s: %v", r.Body, err)
	}
	id := got.ID
	status, _, by, body := ask(t, e, id, false)
	if status != http.StatusOK || by != "b" {
		t.Fatalf("follow-up of %s: %d by %q: %s", id, status, by, body)
	}
	if n := len(a.requests()); n != 1 {
		t.Fatalf("a saw %d requests, want only the first (its 503)", n)
	}
}

// An error answer is not remembered, even one whose body has a top-level
// id: its provider holds no such response, and the follow-up is routed
// as usual (to a).
func TestResponsesErrorAnswerNotRemembered36r(t *testing.T) {
	var failed atomic.Bool
	e, a, b := responsesPairServing(t, func(b *vllmResponses, w http.ResponseWriter, r *http.Request) {
		if failed.CompareAndSwap(false, true) {
			writeJSON(w, http.StatusBadRequest, `{"id":"resp_b00000000000000000000000000000000","object":"response","status":"failed",`+
				`"error":{"message":"The prompt is too long.","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`)
			return
		}
		b.serve(w, r)
	})
	a.busyNext.Store(true)
	r := post(t, e, "/v1/responses", `{"model":"m","input":"hi"}`)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("first request: %d %s", r.Status, r.Body)
	}
	status, _, by, body := ask(t, e, "resp_b00000000000000000000000000000000", false)
	if status != http.StatusNotFound || len(a.requests()) != 2 || len(b.requests()) != 1 {
		t.Fatalf("follow-up of the failed answer: %d by %q: %s (a saw %d requests, b %d; want a's 404)", status, by, body, len(a.requests()), len(b.requests()))
	}
}
