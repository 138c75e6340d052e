package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// An endpoint written as a URL (the form OTEL_EXPORTER_OTLP_ENDPOINT
// takes) is refused at startup: the exporter would put its own scheme in
// front of it and every export would fail, with no trace ever arriving.
func TestSetupRefusesEndpointThatIsNotHostPort(t *testing.T) {
	for _, ep := range []string{
		"http://127.0.0.1:4318",
		"https://collector:4318",
		"collector:4318/v1/traces",
		"user@collector:4318",
		"",
		"collector:4318 ",
	} {
		_, shutdown, err := Setup(context.Background(), config.Tracing{Enabled: true, Endpoint: ep, Insecure: true, SampleRatio: 1}, "test")
		if err == nil {
			shutdown()
			t.Errorf("Setup(endpoint %q) accepted it", ep)
		}
	}
}

// A host:port endpoint still works: a sampled span reaches the collector
// by the shutdown flush.
func TestSetupExportsToHostPort(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			got.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ep := strings.TrimPrefix(srv.URL, "http://")
	tp, shutdown, err := Setup(context.Background(), config.Tracing{Enabled: true, Endpoint: ep, Insecure: true, SampleRatio: 1}, "test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("t").Start(context.Background(), "op")
	span.End()
	shutdown()
	if got.Load() == 0 {
		t.Fatal("no export reached the collector")
	}
}

// Setup's refusal names the key, not the endpoint: a URL's user info is a
// credential, and the refusal is logged.
func TestSetupRefusalHidesEndpointCredentials(t *testing.T) {
	_, _, err := Setup(context.Background(), config.Tracing{Enabled: true, Endpoint: "https://u:s3cr3t@collector:4318", SampleRatio: 1}, "test")
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("err = %v, want a refusal without the credential", err)
	}
}
