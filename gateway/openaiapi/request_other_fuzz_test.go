package openaiapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// checkParsed holds what every Parse* promises: a request or an error, the
// error a 400 invalid_request with a JSON envelope, and an accepted body
// valid JSON whose model can be rewritten and whose run input can be
// built (or refused with a 400) without a panic.
func checkParsed(t *testing.T, body []byte, r any, err error, runInput func() error) {
	t.Helper()
	if (r == nil) == (err == nil) {
		t.Fatalf("request %v and error %v", r, err)
	}
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Code != CodeInvalidRequest || !json.Valid(e.Envelope()) {
			t.Fatalf("bad error %v", err)
		}
		return
	}
	if !json.Valid(body) {
		t.Fatalf("accepted a body that is not JSON: %q", body)
	}
	if out, err := RewriteValidModel(body, "t"); err != nil || !json.Valid(out) {
		t.Fatalf("parsed body not rewritable: %q, %v", out, err)
	}
	if err := runInput(); err != nil && !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("run input: %v", err)
	}
}

// FuzzParseCompletionAndEmbedding: the prompt and input shapes (strings,
// token arrays, batches of either) of the two endpoints that take them.
func FuzzParseCompletionAndEmbedding(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hi","stream":true,"stream_options":{"include_usage":true},"max_tokens":0,"logprobs":0,"echo":true}`,
		`{"model":"m","prompt":[[1,2],[3]],"n":2,"stop":["a","b"]}`,
		`{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":256}`,
		`{"model":"m","input":[1,2,3]}`, `{"model":"m","input":[[1],[-2e0]]}`, `{"model":"m","input":["a",[1]]}`,
		`{"model":"m","input":[""]}`, `{"model":"m","prompt":[]}`, `{"model":"m","input":[[]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseCompletion(body)
		checkParsed(t, body, nilIfNil(c), err, func() error { _, err := c.RunInput(); return err })
		if c != nil && (c.PromptCount < 1 || c.PromptBytes < 0 || c.N < 1 || c.N > MaxChoices) {
			t.Fatalf("inconsistent completion %+v", c)
		}
		e, err := ParseEmbedding(body)
		checkParsed(t, body, nilIfNil(e), err, func() error { _, err := e.RunInput(); return err })
		if e != nil && (e.InputCount < 1 || e.InputCount > MaxEmbeddingInputs || e.PromptBytes < 0 ||
			(e.EncodingFormat != EncodingFloat && e.EncodingFormat != EncodingBase64)) {
			t.Fatalf("inconsistent embedding %+v", e)
		}
	})
}

// nilIfNil keeps a nil request pointer a nil interface.
func nilIfNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}

// FuzzRenderEmbeddings: whatever output a node reports, the list is valid
// JSON with one item per input, in order, each a number array copied as
// sent or OpenAI's base64 of its float32s; or it is a 502.
func FuzzRenderEmbeddings(f *testing.F) {
	for _, s := range []string{`[[0.1,-2e-3],[3]]`, `[[]]`, `[[1e400]]`, `[null]`, `[[1,[2]]]`, `{"a":1}`, `[[1],"x"]`, ` [ [ 1 , 2 ] ] `} {
		f.Add([]byte(s), uint8(0), false)
	}
	f.Fuzz(func(t *testing.T, output []byte, inputs uint8, b64 bool) {
		opts := EmbeddingOptions{Model: "m", InputCount: int(inputs % 4), PromptTokens: 2}
		if b64 {
			opts.EncodingFormat = EncodingBase64
		}
		body, e := RenderEmbeddings(opts, output, &iop.Usage{PromptTokens: 1})
		if e != nil {
			if e.Status != 502 || e.Code != CodeUpstreamError {
				t.Fatalf("error %v", e)
			}
			return
		}
		var list struct {
			Object string `json:"object"`
			Data   []struct {
				Object    string          `json:"object"`
				Index     int             `json:"index"`
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &list); err != nil || list.Object != "list" {
			t.Fatalf("rendered %q: %v", body, err)
		}
		var vectors [][]float64
		if err := json.Unmarshal(output, &vectors); err != nil || len(vectors) != len(list.Data) ||
			(opts.InputCount > 0 && len(vectors) != opts.InputCount) {
			t.Fatalf("rendered %d items from %q (%v)", len(list.Data), output, err)
		}
		for i, d := range list.Data {
			if d.Index != i || d.Object != "embedding" {
				t.Fatalf("item %d: %+v", i, d)
			}
			if !b64 {
				var got []float64
				if err := json.Unmarshal(d.Embedding, &got); err != nil || len(got) != len(vectors[i]) {
					t.Fatalf("item %d: %q", i, d.Embedding)
				}
				continue
			}
			var s string
			if json.Unmarshal(d.Embedding, &s) != nil {
				t.Fatalf("item %d is not a string: %q", i, d.Embedding)
			}
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw) != 4*len(vectors[i]) {
				t.Fatalf("item %d: %d bytes for %d floats (%v)", i, len(raw), len(vectors[i]), err)
			}
		}
	})
}
