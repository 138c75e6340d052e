package ollama

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// ollamaEmbedContext imitates /api/embed for a model whose context holds
// maxChars characters of input: an input past it is cut to its head and
// embedded when truncate is absent or true (Ollama's default), and refused
// with truncate false, as server/routes.go EmbedHandler does:
// api.StatusError{StatusCode: 400, ErrorMessage: "the input length exceeds
// the context length"} written by c.AbortWithStatusJSON.
func ollamaEmbedContext(t *testing.T, maxChars int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input    []string `json:"input"`
			Truncate *bool    `json:"truncate"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("embed request: %v", err)
		}
		for _, in := range req.Input {
			if len(in) > maxChars && req.Truncate != nil && !*req.Truncate {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":"the input length exceeds the context length"}`)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, `{"model":"nomic-embed-text","embeddings":[[0.010071029,-0.0017594862]],"total_duration":14143917,"load_duration":1019500,"prompt_eval_count":8}`)
	}
}

// An input longer than the model's context is refused as OpenAI's
// embeddings endpoint refuses it, not embedded by its head in silence.
func TestEmbeddingOverContextRefused(t *testing.T) {
	f := newFake(t)
	f.handle("/api/embed", ollamaEmbedContext(t, 16))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	res, err := runEmbedding(t, inst, `{"model":"nomic-embed-text","input":"a chunk of a document far longer than the context"}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || ae.HTTPStatus != http.StatusBadRequest ||
		ae.Message != "the input length exceeds the context length" {
		t.Fatalf("res = %v, err = %#v", res, err)
	}
	wantJSON(t, "truncate", decodeBody(t, f.request(t).body)["truncate"], `false`)
}

// A caller who wants Ollama's truncation asks for it with its own member.
func TestEmbeddingTruncateOptIn(t *testing.T) {
	f := newFake(t)
	f.handle("/api/embed", ollamaEmbedContext(t, 16))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	res, err := runEmbedding(t, inst, `{"input":"a chunk of a document far longer than the context","truncate":true}`)
	if err != nil || string(res.Output) != `[[0.010071029,-0.0017594862]]` {
		t.Fatalf("res = %v, err = %v", res, err)
	}
	wantJSON(t, "truncate", decodeBody(t, f.request(t).body)["truncate"], `true`)
}

func TestEmbeddingBadTruncateRefused(t *testing.T) {
	f := newFake(t)
	f.handle("/api/embed", ollamaEmbedContext(t, 16))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, err := runEmbedding(t, inst, `{"input":"short","truncate":"yes"}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || ae.Message != "truncate must be a boolean" {
		t.Fatalf("err = %v, want invalid_request", err)
	}
	select {
	case r := <-f.reqs:
		t.Fatalf("request sent upstream: %s", r.body)
	default:
	}
}
