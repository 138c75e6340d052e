package ollama

import (
	"errors"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestNormalizeBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 DefaultBaseURL,
		"http://127.0.0.1:11434":           "http://127.0.0.1:11434",
		"http://127.0.0.1:11434/":          "http://127.0.0.1:11434",
		"http://127.0.0.1:11434/v1":        "http://127.0.0.1:11434",
		"http://127.0.0.1:11434/v1/":       "http://127.0.0.1:11434",
		"https://gw.example.com/ollama/":   "https://gw.example.com/ollama",
		"https://gw.example.com/ollama/v1": "https://gw.example.com/ollama",
	} {
		got, err := normalizeBaseURL(in)
		if err != nil || got != want {
			t.Errorf("normalizeBaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"ftp://host", "localhost:11434", "http://", "http://u:p@host", "http://host/?x=1", "http://host/#f", "http://[::1"} {
		if _, err := normalizeBaseURL(in); err == nil {
			t.Errorf("normalizeBaseURL(%q) accepted", in)
		}
	}
}

func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := New(&iop.AdapterConfig{
		Type:       "vllm",
		BaseUrl:    "ftp://x",
		TimeoutSec: -3,
		ApiKeyEnv:  "OLLAMA_KEY_MISSING",
		Headers:    map[string]string{"Bad Name": "v", "X-Ok": "line\nbreak"},
		Settings:   map[string]string{SettingKeepAlive: "forever", SettingOptions: `[1]`},
	}, adapter.Env{Getenv: func(string) string { return "" }})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"type", "base_url", "timeout_sec", "api_key_env", "Bad Name", "X-Ok", SettingKeepAlive, SettingOptions} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q:\n%s", want, msg)
		}
	}
	if _, err := New(nil, adapter.Env{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil config: %v", err)
	}
}

func TestAPIKeyAndHeadersSent(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineFinal))
	inst, err := New(&iop.AdapterConfig{
		Type: TypeName, BaseUrl: f.URL, ApiKeyEnv: "OLLAMA_PROXY_KEY",
		Headers: map[string]string{"X-Route": "gpu-a"},
	}, adapter.Env{Getenv: func(k string) string {
		if k == "OLLAMA_PROXY_KEY" {
			return "sk-test"
		}
		return ""
	}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer inst.Close()
	if _, _, err := runChat(t, inst.(*Instance), simpleChat); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := f.request(t)
	if r.header.Get("Authorization") != "Bearer sk-test" || r.header.Get("X-Route") != "gpu-a" {
		t.Fatalf("headers = %v", r.header)
	}
}

func TestKeepAliveForms(t *testing.T) {
	for in, want := range map[string]string{"300": "300", "-1": "-1", "5m": `"5m"`, "1h30m": `"1h30m"`} {
		got, err := parseKeepAlive(in)
		if err != nil || string(got) != want {
			t.Errorf("parseKeepAlive(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
}
