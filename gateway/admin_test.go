package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/gateway"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// /v1/models and /v1/models/{id} through the SDK: the configured external
// names, in config order, OpenAI list shape.
func TestModels(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)},
		modelOn("demo", "mock", "m"), modelOn("qwen-7b", "mock", "m"), modelOn("meta-llama/Llama-3.1-8B", "mock", "m"))
	cfg.Auth.APIKeys = []string{"sk-good"}
	e := startEdge(t, cfg) // listing needs no node
	cl := oaClient(t, e, "sk-good")

	list, err := cl.ListModels(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Models {
		ids = append(ids, m.ID)
		if m.Object != "model" || m.OwnedBy != "iop" || m.CreatedAt == 0 {
			t.Errorf("model %+v", m)
		}
	}
	if strings.Join(ids, ",") != "demo,qwen-7b,meta-llama/Llama-3.1-8B" {
		t.Errorf("ids %v", ids)
	}
	for _, id := range ids {
		m, err := cl.GetModel(ctxT(t), id)
		if err != nil {
			t.Errorf("GetModel(%q): %v", id, err)
			continue
		}
		if m.ID != id || m.Object != "model" {
			t.Errorf("GetModel(%q) = %+v", id, m)
		}
	}
	_, err = cl.GetModel(ctxT(t), "gpt-9")
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}
	for _, p := range []string{"/v1/models/gpt-9", "/v1/models/", "/v1/models/demo/extra"} {
		r := do(t, httpClient(t), http.MethodGet, e.URL+p, "", map[string]string{"Authorization": "Bearer sk-good"})
		assertError(t, r, http.StatusNotFound, "model_not_found")
	}
	if _, err := oaClient(t, e, "sk-bad").ListModels(ctxT(t)); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusUnauthorized {
		t.Errorf("bad key: %v", err)
	}
}

// /healthz is always 200; /readyz is 503 until a provider is dispatchable.
func TestHealthAndReadiness(t *testing.T) {
	e := startEdge(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "m")))
	c := httpClient(t)
	if r := do(t, c, http.MethodGet, e.URL+"/healthz", "", nil); r.Status != http.StatusOK {
		t.Errorf("/healthz %d", r.Status)
	}
	if r := do(t, c, http.MethodGet, e.URL+"/readyz", "", nil); r.Status != http.StatusServiceUnavailable {
		t.Errorf("/readyz before any node: %d %s", r.Status, r.Body)
	}
	n := startNode(t, e)
	if r := do(t, c, http.MethodGet, e.URL+"/readyz", "", nil); r.Status != http.StatusOK {
		t.Errorf("/readyz with a ready node: %d %s", r.Status, r.Body)
	}
	n.Stop()
	stack.WaitFor(t, waitLong, "/readyz back to 503 after the node left", func() bool {
		return do(t, c, http.MethodGet, e.URL+"/readyz", "", nil).Status == http.StatusServiceUnavailable
	})
	if r := do(t, c, http.MethodGet, e.URL+"/metrics", "", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `iop_node_connected{node="gpu-a"} 0`) {
		t.Errorf("/metrics: %d %.300s", r.Status, r.Body)
	}
}

// X-Request-Id is echoed when sent (valid) and generated otherwise, on
// every route including errors.
func TestRequestID(t *testing.T) {
	s := mockStack(t, nil)
	c := httpClient(t)
	chat := `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`
	r := do(t, c, http.MethodPost, s.URL+"/v1/chat/completions", chat, map[string]string{"X-Request-Id": "client-req-42"})
	if r.Status != http.StatusOK || r.Header.Get("X-Request-Id") != "client-req-42" {
		t.Errorf("echo: %d %q", r.Status, r.Header.Get("X-Request-Id"))
	}
	seen := map[string]bool{}
	for _, hdr := range []map[string]string{nil, {"X-Request-Id": strings.Repeat("x", 200)}, {"X-Request-Id": "has space"}} {
		r := do(t, c, http.MethodPost, s.URL+"/v1/chat/completions", chat, hdr)
		id := r.Header.Get("X-Request-Id")
		if !strings.HasPrefix(id, "req_") || len(id) < 12 || seen[id] {
			t.Errorf("generated id %q (sent %v)", id, hdr)
		}
		seen[id] = true
	}
	r = do(t, c, http.MethodPost, s.URL+"/v1/chat/completions", `{`, map[string]string{"X-Request-Id": "bad-json-1"})
	if r.Status != http.StatusBadRequest || r.Header.Get("X-Request-Id") != "bad-json-1" {
		t.Errorf("error path: %d %q", r.Status, r.Header.Get("X-Request-Id"))
	}
	if r := do(t, c, http.MethodGet, s.URL+"/healthz", "", nil); !strings.HasPrefix(r.Header.Get("X-Request-Id"), "req_") {
		t.Errorf("/healthz has no request id")
	}
}

// adminStack: node gpu-a connected (mock "mock" referenced, "spare" not),
// node gpu-b configured but never connected; admin token set.
func adminStack(t *testing.T) *stackT {
	t.Helper()
	mock := mockProvider("mock", map[string]any{"delay_ms": 100})
	mock.LongCapacity = 2
	spare := config.ProviderSpec{Name: "spare", Type: "mock"}
	cfg := edgeConfig([]config.ProviderSpec{mock, spare}, modelOn("demo", "mock", "m"),
		config.ModelSpec{Name: "qwen-7b", Providers: []config.ModelProvider{{Node: "gpu-b", Provider: "vllm-b", Target: target}}})
	cfg.Nodes = append(cfg.Nodes, config.NodeSpec{ID: "gpu-b", Token: "tok-b",
		Providers: []config.ProviderSpec{{Name: "vllm-b", Type: "vllm", BaseURL: "http://" + closedPort(t) + "/v1", Capacity: 8, LongCapacity: 2}}})
	cfg.Auth.AdminToken = "adm-secret"
	e, n := startStack(t, cfg)
	return &stackT{Edge: e, Node: n}
}

func admin(t *testing.T, s *stackT, method, path string) response {
	t.Helper()
	return do(t, httpClient(t), method, s.URL+path, "", map[string]string{"Authorization": "Bearer adm-secret"})
}

// /admin/status is exactly CONTRACT §5's document: every figure present
// even when 0, a disconnected node with connected:false and its providers
// unavailable/offline with zeros.
func TestAdminStatus(t *testing.T) {
	s := adminStack(t)
	provider := func(id, typ, cat, status, health string, capacity, long, inFlight, confCap, confLong int) string {
		return `{"provider_id":"` + id + `","type":"` + typ + `","category":"` + cat + `","status":"` + status + `","health":"` + health +
			`","capacity":` + itoa(capacity) + `,"long_capacity":` + itoa(long) + `,"in_flight":` + itoa(inFlight) +
			`,"long_in_flight":0,"queued":0,"long_queued":0,"configured_capacity":` + itoa(confCap) +
			`,"configured_long_capacity":` + itoa(confLong) + `,"waiting":0,"backend_running":0,"backend_waiting":0,"kv_cache_usage":0}`
	}
	versions := map[string]string{}
	for _, n := range s.Dispatcher.Status().Nodes {
		versions[n.ID] = n.DesiredConfigVersion
	}
	want := func(inFlight int) string {
		return `{"nodes":[` +
			`{"id":"gpu-a","connected":true,"providers":[` + provider("mock", "mock", "api", "available", "ok", 4, 2, inFlight, 4, 2) + `,` +
			provider("spare", "mock", "api", "disabled", "ok", 1, 1, 0, 1, 1) + `],` +
			`"config_version":"` + versions["gpu-a"] + `","desired_config_version":"` + versions["gpu-a"] + `"},` +
			`{"id":"gpu-b","connected":false,"providers":[` + provider("vllm-b", "vllm", "local_inference", "unavailable", "offline", 0, 0, 0, 8, 2) + `],` +
			`"config_version":"","desired_config_version":"` + versions["gpu-b"] + `"}],` +
			`"models":[{"name":"demo","pending":0},{"name":"qwen-7b","pending":0}]}`
	}
	r := admin(t, s, http.MethodGet, "/admin/status")
	if r.Status != http.StatusOK || string(r.Body) != want(0) {
		t.Errorf("status:\n got %d %s\nwant %s", r.Status, r.Body, want(0))
	}

	// While a run holds a lease, in_flight shows it.
	_, _, cancel := openStream(t, s.URL+"/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"`+strings.Repeat("w ", 50)+`"}]}`)
	if r := admin(t, s, http.MethodGet, "/admin/status"); string(r.Body) != want(1) {
		t.Errorf("status with one lease:\n got %s\nwant %s", r.Body, want(1))
	}
	cancel()
	waitReleased(t, s.Edge, "mock")
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// The admin token guards every /admin route; /v1 is not affected by it.
func TestAdminAuth(t *testing.T) {
	s := adminStack(t)
	c := httpClient(t)
	for _, path := range []string{"/admin/status", "/admin/nodes/gpu-a/commands/usage"} {
		for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, {"Authorization": "adm-secret"}} {
			r := do(t, c, http.MethodGet, s.URL+path, "", hdr)
			assertError(t, r, http.StatusUnauthorized, "invalid_admin_token")
			if strings.Contains(string(r.Body), "adm-secret") {
				t.Errorf("401 leaks the token: %s", r.Body)
			}
		}
	}
	for _, p := range []string{"/admin/nodes/gpu-a/refresh", "/admin/sessions/s-1/terminate", "/admin/reload"} {
		assertError(t, do(t, c, http.MethodPost, s.URL+p, "", nil), http.StatusUnauthorized, "invalid_admin_token")
	}
	if r := admin(t, s, http.MethodGet, "/admin/status"); r.Status != http.StatusOK {
		t.Errorf("with token: %d", r.Status)
	}
	if r := do(t, c, http.MethodGet, s.URL+"/v1/models", "", nil); r.Status != http.StatusOK {
		t.Errorf("/v1/models without api_keys: %d", r.Status)
	}
	// Nor is the admin token an API key.
	if r := do(t, c, http.MethodGet, s.URL+"/admin/status", "", map[string]string{"Authorization": "Bearer sk-anything"}); r.Status != http.StatusUnauthorized {
		t.Errorf("API-looking key on admin: %d", r.Status)
	}
}

// Node commands, refresh, session termination and reload.
func TestAdminNodeOperations(t *testing.T) {
	s := adminStack(t)
	if r := post(t, s.Edge, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"a b"}]}`); r.Status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.Status, r.Body)
	}

	var usage struct {
		Node   string `json:"node"`
		Type   string `json:"type"`
		Result struct {
			Adapters []struct {
				Adapter          string `json:"adapter"`
				Type             string `json:"type"`
				Requests         int    `json:"requests"`
				PromptTokens     int    `json:"prompt_tokens"`
				CompletionTokens int    `json:"completion_tokens"`
			} `json:"adapters"`
		} `json:"result"`
	}
	stack.WaitFor(t, waitLong, "usage to count the run", func() bool {
		r := admin(t, s, http.MethodGet, "/admin/nodes/gpu-a/commands/usage")
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &usage) != nil {
			t.Fatalf("usage: %d %s", r.Status, r.Body)
		}
		for _, a := range usage.Result.Adapters {
			if a.Adapter == "mock" {
				return a.Requests == 1 && a.PromptTokens == 2 && a.CompletionTokens == 2
			}
		}
		return false
	})
	if usage.Node != "gpu-a" || usage.Type != "usage" || len(usage.Result.Adapters) != 2 {
		t.Errorf("usage %+v", usage)
	}

	r := admin(t, s, http.MethodGet, "/admin/nodes/gpu-a/commands/providers")
	var prov struct {
		Result struct {
			Providers []map[string]any `json:"providers"`
		} `json:"result"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &prov) != nil || len(prov.Result.Providers) != 2 {
		t.Fatalf("providers: %d %s", r.Status, r.Body)
	}
	for _, p := range prov.Result.Providers {
		if p["provider_id"] != "mock" && p["provider_id"] != "spare" || p["status"] != "available" {
			t.Errorf("provider snapshot %v", p)
		}
	}
	for _, typ := range []string{"capabilities", "sessions", "transport"} {
		if r := admin(t, s, http.MethodGet, "/admin/nodes/gpu-a/commands/"+typ); r.Status != http.StatusOK || !json.Valid(r.Body) {
			t.Errorf("%s: %d %s", typ, r.Status, r.Body)
		}
	}
	assertError(t, admin(t, s, http.MethodGet, "/admin/nodes/gpu-a/commands/reboot"), http.StatusNotFound, "unknown_command")
	assertError(t, admin(t, s, http.MethodGet, "/admin/nodes/nope/commands/usage"), http.StatusNotFound, "node_not_found")
	assertError(t, admin(t, s, http.MethodGet, "/admin/nodes/gpu-b/commands/usage"), http.StatusConflict, "node_not_ready")

	r = admin(t, s, http.MethodPost, "/admin/nodes/gpu-a/refresh")
	if r.Status != http.StatusOK || string(r.Body) != `{"node":"gpu-a","reason":"","status":"applied"}` {
		t.Errorf("refresh: %d %s", r.Status, r.Body)
	}
	assertError(t, admin(t, s, http.MethodPost, "/admin/nodes/nope/refresh"), http.StatusNotFound, "node_not_found")
	assertError(t, admin(t, s, http.MethodPost, "/admin/nodes/gpu-b/refresh"), http.StatusConflict, "node_not_ready")

	r = admin(t, s, http.MethodPost, "/admin/sessions/sess-1/terminate")
	if r.Status != http.StatusOK || string(r.Body) != `{"nodes_reached":1,"session_id":"sess-1"}` {
		t.Errorf("terminate: %d %s", r.Status, r.Body)
	}
	if got := cancellations(t, s.Edge, "admin"); got != 1 {
		t.Errorf("iop_cancellations_total{admin} = %v", got)
	}
	// This edge was started without a config file.
	assertError(t, admin(t, s, http.MethodPost, "/admin/reload"), http.StatusNotImplemented, "reload_unavailable")
}

// A node whose connection fails in the middle of an admin round trip:
// the answers carry a code and a fixed message, never transport text
// (addresses, ports, OS errors); the reload result likewise.
func TestAdminNodeFailureHidesTransport(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Auth.AdminToken = "adm-secret"
	var e *stack.Edge
	next := fakeNodeConfig(t)
	next.Auth.AdminToken = "adm-secret"
	next.Nodes[0].Providers[1].Capacity = 7 // the node's payload changes: reload pushes it
	if err := next.Normalize(); err != nil {
		t.Fatal(err)
	}
	e = stack.StartEdge(t, cfg, stack.EdgeOptions{Reload: func() (*gateway.ReloadReport, error) {
		return &gateway.ReloadReport{Nodes: e.Dispatcher.ReloadAndRefresh(context.Background(), next, 5*time.Second)}, nil
	}})
	s := &stackT{Edge: e}
	// dies drops the whole connection as soon as a command or refresh
	// arrives.
	dies := func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		n.record(first)
		_ = n.cc.Close()
	}
	leaks := func(body []byte) bool {
		for _, s := range []string{"127.0.0.1", "tcp", "nodewire", "dispatch:", "EOF", "reset", "closed", e.NodeAddr} {
			if strings.Contains(string(body), s) {
				return true
			}
		}
		return false
	}
	for _, path := range []string{"/admin/nodes/gpu-a/commands/usage", "/admin/nodes/gpu-a/refresh"} {
		startFakeNode(t, e, dies)
		method := http.MethodGet
		if strings.HasSuffix(path, "refresh") {
			method = http.MethodPost
		}
		r := admin(t, s, method, path)
		assertError(t, r, http.StatusBadGateway, "node_lost")
		if leaks(r.Body) {
			t.Errorf("%s: transport detail in the answer: %s", path, r.Body)
		}
	}

	startFakeNode(t, e, dies)
	r := admin(t, s, http.MethodPost, "/admin/reload")
	var rep struct {
		Status string            `json:"status"`
		Nodes  map[string]string `json:"nodes"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rep) != nil || rep.Status != "reloaded" {
		t.Fatalf("reload: %d %s", r.Status, r.Body)
	}
	if res := rep.Nodes[nodeID]; !strings.HasPrefix(res, "error: ") || leaks(r.Body) {
		t.Errorf("reload result %q: want a code, no transport detail (%s)", res, r.Body)
	}

	// A node answering out of protocol.
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA}}})
		_ = st.CloseWrite()
	})
	r = admin(t, s, http.MethodGet, "/admin/nodes/gpu-a/commands/usage")
	assertError(t, r, http.StatusBadGateway, "protocol_error")
	if leaks(r.Body) {
		t.Errorf("protocol error answer: %s", r.Body)
	}
}

// POST /admin/reload passes on the keys the reload could not apply.
func TestAdminReloadNamesRestartKeys(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Auth.AdminToken = "adm-secret"
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Reload: func() (*gateway.ReloadReport, error) {
		return &gateway.ReloadReport{Nodes: map[string]string{}, RestartRequired: []string{"listen", "log"}}, nil
	}})
	r := admin(t, &stackT{Edge: e}, http.MethodPost, "/admin/reload")
	var rep struct {
		Status          string   `json:"status"`
		RestartRequired []string `json:"restart_required"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rep) != nil {
		t.Fatalf("reload: %d %s", r.Status, r.Body)
	}
	if rep.Status != "reloaded" || !slices.Equal(rep.RestartRequired, []string{"listen", "log"}) {
		t.Fatalf("reload answer %s: want status reloaded and restart_required [listen log]", r.Body)
	}
}
