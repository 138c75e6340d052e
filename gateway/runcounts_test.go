package gateway_test

import (
	"net/http"
	"testing"
)

// A whole (non-streamed) run counts the tokens its node reported and
// one time to first token.
func TestWholeRunCountsUsageAndFirstTokenOnce(t *testing.T) {
	e := pageStack(t, nil)
	r := post(t, e, "/v1/chat/completions", chatBody("demo", "one two three", false))
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	for kind, want := range map[string]float64{"prompt": 3, "completion": 3} {
		if got := metric(t, e.Registry, "iop_tokens_total", map[string]string{"model": "demo", "kind": kind}); got != want {
			t.Errorf("iop_tokens_total{kind=%q} = %v, want %v", kind, got, want)
		}
	}
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var samples uint64
	for _, mf := range mfs {
		if mf.GetName() == "iop_time_to_first_token_seconds" {
			for _, m := range mf.GetMetric() {
				samples += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if samples != 1 {
		t.Errorf("time to first token observed %d times, want 1", samples)
	}
}
