package ollama

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// runGenerateBody runs a completion of the OpenAI completions body (as the
// edge normalizes it) against f, whose /api/generate the test set.
func runGenerateBody(t *testing.T, f *fakeOllama, body string) ([]string, error) {
	t.Helper()
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	sink := newSink()
	_, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpCompletion, Target: "qwen3",
		Input: testinput.For(iop.RunOperation_RUN_OPERATION_COMPLETION, body),
	}, sink)
	return sink.got(), err
}

// A completion's reasoning_effort (or reasoning.effort) becomes
// /api/generate's think exactly as a chat's becomes /api/chat's; without
// one no think is sent, and the rest of the body is unchanged.
func TestCompletionReasoningEffortMapsToThink(t *testing.T) {
	cases := append(effortThinkCases(),
		effortThink{`,"user":"u-1","echo":false`, ``})
	for _, c := range cases {
		t.Run(c.extra, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/generate", ndjson(genLineThink, genLineAns, genLineDone))
			if _, err := runGenerateBody(t, f, `{"model":"m","prompt":"a haiku","max_tokens":9`+c.extra+`}`); err != nil {
				t.Fatalf("Run: %v", err)
			}
			body := decodeBody(t, f.request(t).body)
			think, ok := body["think"]
			delete(body, "think")
			wantJSON(t, "body", body, `{"model":"qwen3","prompt":"a haiku","stream":true,"options":{"num_predict":9}}`)
			wantThink(t, think, ok, c.think)
		})
	}
}

// An effort Ollama has no mapping for, or a reasoning member of the wrong
// type, is the caller's error on a completion too: invalid_request with
// the chat's wording, before anything is sent.
func TestCompletionBadReasoningEffortRefused(t *testing.T) {
	for _, extra := range []string{`"reasoning_effort":"extreme"`, `"reasoning_effort":3`, `"reasoning":"high"`} {
		t.Run(extra, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/generate", ndjson(genLineThat, genLineFinal))
			_, err := runGenerateBody(t, f, `{"model":"m","prompt":"a haiku",`+extra+`}`)
			var ae *adapter.Error
			if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || strings.Contains(ae.Message, "Go") {
				t.Fatalf("err = %v, want invalid_request", err)
			}
			if extra == `"reasoning_effort":"extreme"` && !strings.Contains(ae.Message, `invalid reasoning value: "extreme"`) {
				t.Fatalf("message %q, want Ollama's words", ae.Message)
			}
			select {
			case r := <-f.reqs:
				t.Fatalf("request sent upstream: %s", r.body)
			default:
			}
		})
	}
}

// /api/generate refuses think for a model that cannot think as /api/chat
// does (server/routes.go, GenerateHandler: 400 "%q does not support
// thinking"): the caller's invalid_request with Ollama's words, sent once.
func TestCompletionThinkOnModelWithoutThinkingIsInvalidRequest(t *testing.T) {
	f := newFake(t)
	f.handle("/api/generate", jsonStatus(http.StatusBadRequest, `{"error":"\"gemma3\" does not support thinking"}`))
	deltas, err := runGenerateBody(t, f, `{"model":"m","prompt":"a haiku","reasoning_effort":"low"}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || ae.HTTPStatus != http.StatusBadRequest ||
		ae.Message != `"gemma3" does not support thinking` {
		t.Fatalf("err = %#v", err)
	}
	if len(deltas) != 0 {
		t.Fatalf("deltas = %q", deltas)
	}
	wantJSON(t, "think", decodeBody(t, f.request(t).body)["think"], `"low"`)
	select {
	case r := <-f.reqs:
		t.Fatalf("request sent again: %s", r.body)
	default:
	}
}
