package openaicompat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestConfigDefaults(t *testing.T) {
	c, err := parseConfig(&iop.AdapterConfig{BaseUrl: "http://127.0.0.1:8000/v1/", TimeoutSec: 30}, TypeVLLM)
	if err != nil {
		t.Fatal(err)
	}
	if c.name != TypeVLLM || c.toolMode != iop.ToolMode_TOOL_MODE_AUTO || c.timeout != 30*time.Second {
		t.Fatalf("config %+v", c)
	}
	if c.endpoint("/models") != "http://127.0.0.1:8000/v1/models" || c.root() != "http://127.0.0.1:8000" {
		t.Fatalf("endpoint %s root %s", c.endpoint("/models"), c.root())
	}
	if c.requestTimeout(5) != 5*time.Second || c.requestTimeout(0) != 30*time.Second {
		t.Fatal("request timeout must win when positive")
	}
}

func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := New(&iop.AdapterConfig{
		Type:       TypeOpenAICompat,
		BaseUrl:    "ftp://user:pw@host/v1",
		TimeoutSec: -1,
		ToolMode:   iop.ToolMode(42),
		ApiKeyEnv:  "1BAD-NAME",
		Headers:    map[string]string{"Authorization": "Bearer x", "Bad Header": "v", "Connection": "close"},
	}, adapter.Env{})
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	joined, ok := errors.Unwrap(err).(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %v does not join its problems", err)
	}
	// base_url (scheme + credentials), timeout, tool_mode, api_key_env and
	// three headers.
	if n := len(joined.Unwrap()); n != 7 {
		t.Fatalf("%d problems reported, want 7: %v", n, err)
	}
	if _, err := New(&iop.AdapterConfig{Type: TypeOpenAICompat}, adapter.Env{}); err == nil {
		t.Fatal("missing base_url accepted")
	}
	if _, err := NewVLLM(&iop.AdapterConfig{Type: TypeOpenAICompat, BaseUrl: "http://h/v1"}, adapter.Env{}); err == nil {
		t.Fatal("type mismatch accepted")
	}
}

func TestResolveTunnelPath(t *testing.T) {
	c, err := parseConfig(&iop.AdapterConfig{BaseUrl: "https://api.example.com/v1"}, TypeOpenAICompat)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"/chat/completions":           "https://api.example.com/v1/chat/completions",
		"models/org%2Fname?x=1&y=%20": "https://api.example.com/v1/models/org%2Fname?x=1&y=%20",
		"/responses":                  "https://api.example.com/v1/responses",
	}
	for in, want := range cases {
		u, err := c.resolve(in)
		if err != nil || u.String() != want {
			t.Errorf("%q: %v %v", in, u, err)
		}
	}
}

func TestReconfigureChangesBaseURL(t *testing.T) {
	seen := make(chan string, 4)
	mk := func(name string) string {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			seen <- name + " " + r.Header.Get("X-Env") + " " + r.Header.Get("Authorization")
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+name+`","object":"model","created":1727000000,"owned_by":"vllm","root":"`+name+`","parent":null,"max_model_len":32768}]}`)
		})
		return srv.URL
	}
	a, b := mk("model-a"), mk("model-b")
	cfg := testConfig(a)
	cfg.Headers = map[string]string{"X-Env": "one"}
	in := newTestInstance(t, TypeOpenAICompat, cfg)
	ids, err := in.Models(context.Background())
	if err != nil || !reflect.DeepEqual(ids, []string{"model-a"}) {
		t.Fatalf("models %v %v", ids, err)
	}
	if got := <-seen; got != "model-a one Bearer sk-node-local" {
		t.Fatalf("request %q", got)
	}

	cfg2 := testConfig(b)
	cfg2.Type = TypeOpenAICompat
	cfg2.Headers = map[string]string{"X-Env": "two"}
	cfg2.ApiKeyEnv = ""
	if err := in.Reconfigure(cfg2); err != nil {
		t.Fatal(err)
	}
	ids, err = in.Models(context.Background())
	if err != nil || !reflect.DeepEqual(ids, []string{"model-b"}) {
		t.Fatalf("models after reconfigure %v %v", ids, err)
	}
	if got := <-seen; got != "model-b two " {
		t.Fatalf("request %q", got)
	}

	// An invalid change is refused and the live config stays.
	if err := in.Reconfigure(&iop.AdapterConfig{Type: TypeOpenAICompat, BaseUrl: "not a url"}); err == nil {
		t.Fatal("invalid reconfigure accepted")
	}
	if err := in.Reconfigure(&iop.AdapterConfig{Type: TypeVLLM, BaseUrl: b + "/v1"}); err == nil {
		t.Fatal("type change accepted")
	}
	if ids, _ := in.Models(context.Background()); !reflect.DeepEqual(ids, []string{"model-b"}) {
		t.Fatalf("models %v", ids)
	}
	<-seen
}

func TestModelsUpstreamError(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"Unauthorized"}`)
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	_, err := in.Models(context.Background())
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeUpstream || ae.HTTPStatus != 401 || ae.Message != adapter.MsgUpstreamCredentials {
		t.Fatalf("error %+v", ae)
	}
}

func TestInstanceInterfaces(t *testing.T) {
	oc, err := New(&iop.AdapterConfig{BaseUrl: "http://h/v1"}, adapter.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := oc.(adapter.HealthReporter); ok {
		t.Fatal("openai_compat must not report vLLM health")
	}
	v, err := NewVLLM(&iop.AdapterConfig{BaseUrl: "http://h/v1"}, adapter.Env{})
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range []adapter.Instance{oc, v} {
		if _, ok := inst.(adapter.Reconfigurer); !ok {
			t.Fatalf("%T is not a Reconfigurer", inst)
		}
		if _, ok := inst.(adapter.ModelLister); !ok {
			t.Fatalf("%T is not a ModelLister", inst)
		}
	}
	if _, ok := v.(adapter.HealthReporter); !ok {
		t.Fatal("vllm must report health")
	}
}
