package gateway_test

import "testing"

func TestZZDebug(t *testing.T) {
	s := mockStack(t, map[string]any{"fail_trigger": "boom x"})
	r := post(t, s.Edge, "/v1/chat/completions", `{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two"}]}`)
	t.Logf("%d %v\n%s", r.Status, r.Header, r.Body)
	r = post(t, s.Edge, "/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"boom x"}]}`)
	t.Logf("%d %v\n%s", r.Status, r.Header, r.Body)
	u := toolFallbackUpstream(t)
	s2 := toolFallbackStack(t, u)
	r = post(t, s2.Edge, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}]}`)
	t.Logf("%d %v\n%s", r.Status, r.Header, r.Body)
	r = post(t, s2.Edge, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}]}`)
	t.Logf("%d %v\n%s", r.Status, r.Header, r.Body)
	for _, q := range u.requests() { t.Logf("%s", q.Body) }
}
