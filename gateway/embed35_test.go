package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// An embedding served as a run is rendered by the options its parsed
// request gives (embedOptions), now that call carries none of its own:
// base64 vectors when asked, the provider's target as model, the prompt
// estimate as usage when the run reports none (the mock reports none).
func TestRunEmbeddingOptionsFromRequest35(t *testing.T) {
	s := mockStack(t, nil)
	r := post(t, s.Edge, "/v1/embeddings", `{"model":"demo","input":["a b","c"],"encoding_format":"base64"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var got struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
			Index     int             `json:"index"`
		} `json:"data"`
		Model string `json:"model"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	if len(got.Data) != 2 || got.Data[1].Index != 1 || got.Usage.PromptTokens != 3 {
		t.Fatalf("embeddings %s", r.Body)
	}
	if got.Model != "mock-echo" { // mockStack's target for "demo"
		t.Errorf("model %q, want the provider's target mock-echo: %s", got.Model, r.Body)
	}
	for _, d := range got.Data {
		var b64 string
		if err := json.Unmarshal(d.Embedding, &b64); err != nil || b64 == "" {
			t.Errorf("embedding %s, want a base64 string", d.Embedding)
		}
	}
	waitReleased(t, s.Edge, "mock")
}
