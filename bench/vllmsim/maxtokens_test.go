package vllmsim

import (
	"encoding/json"
	"net/http"
	"testing"
)

// The answer's length follows vLLM's `max_completion_tokens or
// max_tokens`: the newer field wins when a client sends both.
func TestMaxCompletionTokensWins(t *testing.T) {
	_, srv := startSim(t, fast)
	for _, c := range []struct {
		limits string
		want   int
		code   int
	}{
		{`"max_tokens":5,"max_completion_tokens":3`, 3, http.StatusOK},
		{`"max_completion_tokens":3`, 3, http.StatusOK},
		{`"max_tokens":4`, 4, http.StatusOK},
		{`"max_tokens":4,"max_completion_tokens":0`, 4, http.StatusOK},
		{`"max_completion_tokens":0`, fast.withDefaults().DefaultMaxTokens, http.StatusOK},
		{`"max_tokens":0`, 0, http.StatusBadRequest},
	} {
		resp, err := postChat(t.Context(), srv.URL, `{"model":"m","messages":[{"role":"user","content":"hi"}],`+c.limits+`}`)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode != c.code || err != nil || (c.code == http.StatusOK && doc.Usage.CompletionTokens != c.want) {
			t.Errorf("%s: status %d, %d completion tokens (%v); want status %d, %d", c.limits, resp.StatusCode, doc.Usage.CompletionTokens, err, c.code, c.want)
		}
	}
}
