package ollama

import (
	"context"
	"errors"
	"github.com/iop-gateway/iop/internal/testinput"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func runEmbedding(t *testing.T, inst *Instance, input string) (*adapter.Result, error) {
	t.Helper()
	sink := newSink()
	res, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpEmbedding, Target: "all-minilm", Input: testinput.For(adapter.OpEmbedding, input),
	}, sink)
	if len(sink.got()) != 0 {
		t.Fatalf("embedding produced deltas %q", sink.got())
	}
	return res, err
}

func TestEmbeddings(t *testing.T) {
	f := newFake(t)
	f.handle("/api/embed", jsonStatus(200, embedResponse))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, Settings: map[string]string{SettingKeepAlive: "300"}})

	res, err := runEmbedding(t, inst, `{"input":["Why is the sky blue?","Why is the grass green?"],"encoding_format":"float","dimensions":5}`)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Ollama's numbers are passed through exactly as encoded.
	want := `[[0.010071029,-0.0017594862,0.05007221,0.04692972,0.054916814],[-0.0098373564,0.060185923,0.025680551,0.012934358,-0.017373271]]`
	if string(res.Output) != want {
		t.Fatalf("output = %s", res.Output)
	}
	if u := res.Usage; u == nil || u.PromptTokens != 8 || u.CompletionTokens != 0 || u.TotalTokens != 8 {
		t.Fatalf("usage = %v", res.Usage)
	}
	req := f.request(t)
	if req.path != "/api/embed" {
		t.Fatalf("path = %s", req.path)
	}
	wantJSON(t, "body", decodeBody(t, req.body), `{"model":"all-minilm","input":["Why is the sky blue?","Why is the grass green?"],"dimensions":5,"keep_alive":300,"truncate":false}`)
}

func TestEmbeddingsSingleString(t *testing.T) {
	f := newFake(t)
	f.handle("/api/embed", jsonStatus(200, `{"model":"all-minilm","embeddings":[[0.5,-0.5]],"prompt_eval_count":3}`))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	res, err := runEmbedding(t, inst, `{"input":"hello there"}`)
	if err != nil || string(res.Output) != `[[0.5,-0.5]]` {
		t.Fatalf("res = %v, err = %v", res, err)
	}
	wantJSON(t, "input", decodeBody(t, f.request(t).body)["input"], `["hello there"]`)
}

func TestEmbeddingsErrors(t *testing.T) {
	f := newFake(t)
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	// Count mismatch: 2 vectors for 1 input.
	f.handle("/api/embed", jsonStatus(200, embedResponse))
	_, err := runEmbedding(t, inst, `{"input":["one"]}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream {
		t.Fatalf("mismatch: err = %v", err)
	}

	f.handle("/api/embed", jsonStatus(200, `{"embeddings":"nope"}`))
	if _, err := runEmbedding(t, inst, `{"input":"x"}`); !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream {
		t.Fatalf("malformed: err = %v", err)
	}

	f.handle("/api/embed", jsonStatus(404, `{"error":"model \"all-minilm\" not found, try pulling it first"}`))
	if _, err := runEmbedding(t, inst, `{"input":"x"}`); !errors.As(err, &ae) || ae.HTTPStatus != 404 {
		t.Fatalf("404: err = %v", err)
	}

	// An input without texts (the edge never sends one) is refused unsent.
	if _, err := runEmbedding(t, inst, `{"input":[]}`); !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest {
		t.Errorf("no input: err = %v", err)
	}
}
