package chaos

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/internal/faultproxy"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodeagent"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// logBuffer is a goroutine-safe sink for a zap logger whose output a test
// greps.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) Sync() error { return nil }

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// debugLogger logs everything, as JSON, into b.
func debugLogger(b *logBuffer) *zap.Logger {
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), b, zapcore.DebugLevel))
}

// httpDo sends one request with an optional bearer token; it returns the
// status and body.
func httpDo(t *testing.T, c *http.Client, method, url, bearer, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFatal waits for a node's supervisor to give up and returns its error.
func waitFatal(t *testing.T, n *stack.Node) error {
	t.Helper()
	select {
	case <-n.Done():
		return n.Err()
	case <-time.After(waitLong):
		t.Fatalf("node %s still running after %s", n.ID, waitLong)
		return nil
	}
}

func rejectCode(err error) iop.RejectCode {
	var rej *nodewire.RejectedError
	if errors.As(err, &rej) {
		return rej.Code
	}
	return iop.RejectCode_REJECT_CODE_UNSPECIFIED
}

// Credentials are checked and never logged: a node with a wrong token and
// an unknown node id are refused (fatal for the node), wrong API keys and
// admin tokens get 401, and none of the secrets — right or wrong — appears
// in the edge's or the nodes' debug logs, /metrics or /admin/status.
func TestCredentialsRejectedAndNeverLogged(t *testing.T) {
	const (
		nodeToken  = "nodetok-9f8e7d6c5b4a-SECRET"
		wrongToken = "nodetok-wrong-1a2b3c-SECRET"
		apiKey     = "sk-apikey-0a1b2c3d-SECRET"
		wrongKey   = "sk-wrongkey-4e5f6a-SECRET"
		adminTok   = "admintok-7b8c9d0e-SECRET"
		wrongAdmin = "admintok-wrong-f1e2-SECRET"
		prompt     = "PROMPTMARKER-a1b2c3"
	)
	var logs logBuffer
	log := debugLogger(&logs)
	cfg := &config.Edge{
		Auth:   config.EdgeAuth{APIKeys: []string{apiKey}, AdminToken: adminTok},
		Nodes:  []config.NodeSpec{nodeSpec("a", nodeToken, 0.5, 10, mockProvider("m", 0, 2))},
		Models: []config.ModelSpec{model("demo", 10, [2]string{"a", "m"})},
	}
	e := startTestEdge(t, cfg, edgeOptions{Logger: log})
	stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: nodeToken, Logger: log.With(zap.String("who", "node-a"))})
	waitFor(t, waitLong, "node a ready", func() bool { return connected(e.D, "a") })

	// A second process claiming a with a wrong token, and an unknown id:
	// both refused, both fatal.
	bad := stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: wrongToken, Logger: log})
	if err := waitFatal(t, bad); !errors.Is(err, nodeagent.ErrFatal) || rejectCode(err) != iop.RejectCode_REJECT_CODE_CREDENTIALS {
		t.Errorf("wrong token: node ended with %v, want ErrFatal/CREDENTIALS", err)
	}
	unknown := stack.StartNode(t, e.NodeAddr, "zz", stack.NodeOptions{Token: nodeToken, Logger: log})
	if err := waitFatal(t, unknown); !errors.Is(err, nodeagent.ErrFatal) || rejectCode(err) != iop.RejectCode_REJECT_CODE_UNKNOWN_NODE {
		t.Errorf("unknown id: node ended with %v, want ErrFatal/UNKNOWN_NODE", err)
	}
	if !connected(e.D, "a") {
		t.Error("the rejected impostor disturbed the connected node a")
	}

	c := newClient(t)
	chat := `{"model":"demo","messages":[{"role":"user","content":"` + prompt + `"}]}`
	for _, tc := range []struct {
		method, path, bearer string
		want                 int
	}{
		{"POST", "/v1/chat/completions", "Bearer " + apiKey, 200},
		{"POST", "/v1/chat/completions", "bearer " + apiKey, 200},
		{"POST", "/v1/chat/completions", "", 401},
		{"POST", "/v1/chat/completions", "Bearer " + wrongKey, 401},
		{"POST", "/v1/chat/completions", "Bearer " + apiKey + "x", 401},
		{"POST", "/v1/chat/completions", "Basic " + apiKey, 401},
		{"GET", "/v1/models", "", 401},
		{"GET", "/v1/models", "Bearer " + adminTok, 401},
		{"GET", "/admin/status", "Bearer " + adminTok, 200},
		{"GET", "/admin/status", "", 401},
		{"GET", "/admin/status", "Bearer " + wrongAdmin, 401},
		{"GET", "/admin/status", "Bearer " + apiKey, 401},
		{"POST", "/admin/reload", "", 401},
		{"POST", "/admin/nodes/a/refresh", "Bearer " + wrongAdmin, 401},
		{"GET", "/admin/nodes/a/commands/usage", "", 401},
		{"POST", "/admin/sessions/s1/terminate", "Bearer " + wrongAdmin, 401},
	} {
		st, body := httpDo(t, c, tc.method, e.URL+tc.path, tc.bearer, chat)
		if st != tc.want {
			t.Errorf("%s %s with %q: %d, want %d: %.200s", tc.method, tc.path, tc.bearer, st, tc.want, body)
			continue
		}
		if st == 401 {
			if code, err := envelopeCode([]byte(body)); err != nil || (code != "invalid_api_key" && code != "invalid_admin_token") {
				t.Errorf("%s %s: 401 body %q (%v)", tc.method, tc.path, body, err)
			}
		}
	}
	_, metrics := httpDo(t, c, "GET", e.URL+"/metrics", "", "")
	_, status := httpDo(t, c, "GET", e.URL+"/admin/status", "Bearer "+adminTok, "")

	all := logs.String()
	for _, want := range []string{"node registration rejected", `"msg":"request"`} {
		if !strings.Contains(all, want) {
			t.Fatalf("captured logs lack %q: the grep below would prove nothing", want)
		}
	}
	for _, secret := range []string{nodeToken, wrongToken, apiKey, wrongKey, adminTok, wrongAdmin, "SECRET"} {
		for where, text := range map[string]string{"logs": all, "/metrics": metrics, "/admin/status": status} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain the secret %q", where, secret)
			}
		}
	}
	if strings.Contains(all, prompt) {
		t.Errorf("the debug logs contain the prompt text")
	}
	t.Logf("security: %d bytes of debug logs from edge and nodes, no token, key or prompt in them", len(all))
}

// A node whose token was rotated out keeps its live session (token changes
// apply to the next registration) but is refused with CREDENTIALS on its
// next one, and its process exits with a fatal error; the new token works.
func TestRotatedNodeTokenIsRejected(t *testing.T) {
	mk := func(token string) *config.Edge {
		return &config.Edge{
			Nodes:  []config.NodeSpec{nodeSpec("a", token, 0.5, 10, mockProvider("m", 0, 1))},
			Models: []config.ModelSpec{model("demo", 10, [2]string{"a", "m"})},
		}
	}
	log := quietLogger(t)
	e := stack.StartEdge(t, mk("old-token"), stack.EdgeOptions{Logger: log})
	px, err := faultproxy.New(e.NodeAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	old := stack.StartNode(t, px.Addr(), "a", stack.NodeOptions{Token: "old-token", Logger: log,
		Dial: &nodewire.DialConfig{Address: px.Addr(), Logger: log, HandshakeTimeout: 5 * time.Second}})
	e.WaitReady(t, "a", waitLong)

	next := mk("new-token")
	next.Listen.HTTP, next.Listen.Node = "127.0.0.1:0", "127.0.0.1:0"
	if err := next.Normalize(); err != nil {
		t.Fatal(err)
	}
	e.Dispatcher.Reload(next)
	if !connected(e.Dispatcher, "a") {
		t.Fatal("the reload dropped the live session")
	}
	px.KillAll() // the node must register again
	err = waitFatal(t, old)
	if !errors.Is(err, nodeagent.ErrFatal) || rejectCode(err) != iop.RejectCode_REJECT_CODE_CREDENTIALS {
		t.Fatalf("node with the rotated-out token ended with %v, want ErrFatal/CREDENTIALS", err)
	}
	if connected(e.Dispatcher, "a") {
		t.Error("a still connected with a rotated-out token")
	}
	if got := metric(t, e.Registry, "iop_node_sessions_total", map[string]string{"node": "a", "outcome": "rejected"}); got != 1 {
		t.Errorf("sessions rejected: %v, want 1", got)
	}
	stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "new-token", Logger: log})
	e.WaitReady(t, "a", waitLong)
}

// Provider keys stay on the node: the edge sends only api_key_env's NAME
// (checked on the RegisterResponse actually received over the wire), the
// node resolves it locally, and the upstream sees the node's key — never
// the client's API key.
func TestProviderKeyStaysOnNode(t *testing.T) {
	const (
		keyEnv    = "CHAOS_UPSTREAM_KEY"
		nodeKey   = "sk-node-local-upstream-key"
		clientKey = "sk-client-key-for-the-edge"
	)
	var (
		mu   sync.Mutex
		auth []string
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer upstream.Close()
	cfg := &config.Edge{
		Auth: config.EdgeAuth{APIKeys: []string{clientKey}},
		Nodes: []config.NodeSpec{nodeSpec("a", "tok-a", 0.5, 10,
			config.ProviderSpec{Name: "up", Type: "openai_compat", BaseURL: upstream.URL + "/v1", APIKeyEnv: keyEnv, Capacity: 2})},
		Models: []config.ModelSpec{model("tun", 10, [2]string{"a", "up"})},
	}
	e := startTestEdge(t, cfg, edgeOptions{})

	// What the edge really sends a registering node (before the real node
	// connects: this registration owns the id until it closes).
	conn, resp, err := nodewire.Dial(context.Background(), nodewire.DialConfig{Address: e.NodeAddr}, &iop.RegisterRequest{NodeId: "a", Token: "tok-a"})
	if err != nil {
		t.Fatal(err)
	}
	wire, _ := proto.Marshal(resp)
	_ = conn.Close()
	local, _ := proto.Marshal(dispatch.NodePayload(e.D.Config().Node("a")))
	for name, b := range map[string][]byte{"RegisterResponse": wire, "NodePayload": local} {
		if !bytes.Contains(b, []byte(keyEnv)) {
			t.Errorf("%s lacks the variable name %s", name, keyEnv)
		}
		if bytes.Contains(b, []byte(nodeKey)) || bytes.Contains(b, []byte(clientKey)) {
			t.Errorf("%s carries a key", name)
		}
	}
	if got := resp.GetConfig().GetAdapters()[0].GetApiKeyEnv(); got != keyEnv {
		t.Errorf("adapter api_key_env = %q, want %q", got, keyEnv)
	}

	node := stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "tok-a", Logger: quietLogger(t),
		Getenv: func(k string) string {
			if k == keyEnv {
				return nodeKey
			}
			return ""
		}})
	defer node.Stop() // before the upstream closes
	waitFor(t, waitLong, "node a ready", func() bool { return connected(e.D, "a") })
	c := newClient(t)
	for _, stream := range []string{"false", "true"} {
		st, body := httpDo(t, c, "POST", e.URL+"/v1/chat/completions", "Bearer "+clientKey,
			`{"model":"tun","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`)
		if st != 200 {
			t.Errorf("stream=%s: %d %.200s", stream, st, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, a := range auth {
		if a != "Bearer "+nodeKey {
			t.Errorf("upstream Authorization = %q, want the node-local key", a)
		}
	}
}
