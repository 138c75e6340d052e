package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// vllmChatID is the id vLLM gives a chat completion ("chatcmpl-" and a
// random_uuid's 32 hex digits).
const vllmChatID = "chatcmpl-b0000000000000000000000000000001"

// Only /v1/responses answers are remembered: a chat completion's id is
// not, though b answered it (a failed over to b), so a Responses
// follow-up naming it is routed as usual, to a, which holds no such
// response and says so. Remembering every route's ids would also let
// chat traffic push the conversations' pins out of the edge's bounded
// memory of them.
func TestChatCompletionIDNotRemembered37m(t *testing.T) {
	var chatBusy atomic.Bool
	chatBusy.Store(true)
	a := &vllmResponses{name: "a", store: map[string]bool{}}
	a.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" && chatBusy.CompareAndSwap(true, false) {
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"The engine is overloaded.","type":"ServiceUnavailableError","param":null,"code":503}}`)
			return
		}
		a.serve(w, r)
	})
	b := &vllmResponses{name: "b", store: map[string]bool{}}
	b.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			// vLLM's ChatCompletionResponse, compact as it writes it.
			writeJSON(w, http.StatusOK, `{"id":"`+vllmChatID+`","object":"chat.completion","created":1727000000,"model":"`+target+`",`+
				`"choices":[{"index":0,"message":{"role":"assistant","content":"Hi from b","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},"logprobs":null,"finish_reason":"stop","stop_reason":null}],`+
				`"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4,"prompt_tokens_details":null},"prompt_logprobs":null,"kv_transfer_params":null}`)
			return
		}
		b.serve(w, r)
	})
	e, _, _ := startResponsesPair(t, a, b)
	r := post(t, e, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || len(b.requests()) != 1 {
		t.Fatalf("chat completion: %d %s (b saw %d requests, want it to answer)", r.Status, r.Body, len(b.requests()))
	}
	status, _, _, body := ask(t, e, vllmChatID, false)
	if status != http.StatusNotFound || len(a.requests()) != 2 || len(b.requests()) != 1 {
		t.Fatalf("follow-up naming the chat completion's id: %d %s (a saw %d requests, b %d; want a's 404)", status, body, len(a.requests()), len(b.requests()))
	}
}

// An answer too large to hold (past the edge's 16 MiB bound) is relayed
// as it comes from the point it outgrew the hold: its id, in the held
// beginning, is still read, and the follow-up reaches b. vLLM echoes the
// request's instructions in its answer, so a long one makes a long
// answer.
func TestResponsesAnswerPastTheHoldRemembered37m(t *testing.T) {
	const id = "resp_b00000000000000000000000000000001"
	e, a, _ := responsesPairServing(t, func(b *vllmResponses, w http.ResponseWriter, r *http.Request) {
		if len(b.requests()) > 1 {
			b.serve(w, r)
			return
		}
		b.mu.Lock()
		b.store[id] = true
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"`+id+`","created_at":1727000000,"incomplete_details":null,"instructions":"`)
		pad := strings.Repeat("x", 64<<10)
		for n := 0; n < 16<<20+len(pad); n += len(pad) {
			if _, err := io.WriteString(w, pad); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `","metadata":null,"model":"`+target+`","object":"response","output":[],"status":"completed"}`)
	})
	a.busyNext.Store(true)
	// 16 MiB through upstream, node and edge: a deadline of minutes, not
	// post's, for a loaded box under the race detector.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := tryDo(ctx, &http.Client{}, http.MethodPost, e.URL+"/v1/responses", `{"model":"m","input":"hi"}`, nil)
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	if r.Status != http.StatusOK || len(r.Body) <= 16<<20 || !bytes.HasPrefix(r.Body, []byte(`{"id":"`+id)) {
		t.Fatalf("first request: %d, %d bytes", r.Status, len(r.Body))
	}
	status, _, by, body := ask(t, e, id, false)
	if status != http.StatusOK || by != "b" {
		t.Fatalf("follow-up of %s: %d by %q: %.200s", id, status, by, body)
	}
}
