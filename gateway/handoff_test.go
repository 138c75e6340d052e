package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// A freed slot handed to a queued request is never refused by the node's
// own capacity gate: the node frees its slot before it sends the terminal
// message that lets the edge release the lease.
func TestQueuedHandoffNotRefusedByNodeGate(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	p := vllmProvider("vllm-main", u.baseURL())
	p.Capacity = 1
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{p}, modelOn("qwen-7b", "vllm-main", target)))
	body := `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`
	var chans []<-chan response
	for i := 0; i < 20; i++ {
		chans = append(chans, postAsync(t, e, "/v1/chat/completions", body))
	}
	refused := 0
	for _, ch := range chans {
		r := waitFor(t, ch, waitLong, "a request")
		if r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Body), "at capacity") {
			refused++
		} else if r.Status != http.StatusOK {
			t.Errorf("unexpected answer %d %s", r.Status, r.Body)
		}
	}
	if refused > 0 {
		t.Errorf("%d of 20 queued requests were refused by the node's gate after the edge handed them a free slot", refused)
	}
}
