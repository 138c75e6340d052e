package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// Over HTTP, through the edge: an empty tools array and
// parallel_tool_calls without tools get OpenAI's 400 in its envelope,
// param named; with a tool the request is served.
func TestEmptyToolsAndParallelWithoutToolsAnswered400(t *testing.T) {
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo")))
	const msgs = `{"model":"demo","messages":[{"role":"user","content":"hi"}],`
	for body, param := range map[string]string{
		msgs + `"tools":[]}`:                  "tools",
		msgs + `"parallel_tool_calls":false}`: "parallel_tool_calls",
	} {
		r := post(t, e, "/v1/chat/completions", body)
		assertError(t, r, http.StatusBadRequest, "invalid_request")
		var env struct {
			Error struct{ Param string } `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil || env.Error.Param != param {
			t.Errorf("%s: param %q (%v), want %q: %s", body, env.Error.Param, err, param, r.Body)
		}
	}
	r := post(t, e, "/v1/chat/completions", msgs+`"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false}`)
	if r.Status != http.StatusOK {
		t.Fatalf("with a tool: %d %s", r.Status, r.Body)
	}
}
