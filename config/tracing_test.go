package config

import (
	"strings"
	"testing"
)

// tracing.sample_ratio: 0 keeps no new traces (only those with a sampled
// parent), unset keeps all, a value is kept as written (file and IOP_*).
func TestSampleRatioZeroMeansNone(t *testing.T) {
	for _, tc := range []struct {
		yaml, env string
		want      float64
	}{
		{"tracing: {sample_ratio: 0}\n", "", 0},
		{"tracing: {sample_ratio: 0.25}\n", "", 0.25},
		{"", "", 1},
		{"", "0", 0},
	} {
		if tc.env != "" {
			t.Setenv("IOP_TRACING_SAMPLE_RATIO", tc.env)
		}
		c, err := LoadEdge(writeFile(t, "edge.yaml", tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if c.Tracing.SampleRatio != tc.want {
			t.Errorf("%q env %q: sample ratio %g, want %g", tc.yaml, tc.env, c.Tracing.SampleRatio, tc.want)
		}
	}
}

// A tracing.endpoint that is not host:port is a config problem, so
// --check-config and a reload report it instead of the start-up failing
// after "ok"; the problem never quotes user info the URL may carry.
func TestTracingEndpointNotHostPortIsAProblem(t *testing.T) {
	for _, ep := range []string{"https://u:s3cr3t@collector:4318", "http://collector:4318", "collector:4318/v1/traces", "collector:4318 "} {
		y := "tracing: {enabled: true, endpoint: '" + ep + "'}\n"
		_, err := LoadEdge(writeFile(t, "edge.yaml", y))
		if err == nil || !strings.Contains(err.Error(), "tracing.endpoint") {
			t.Errorf("edge %q: err = %v, want a tracing.endpoint problem", ep, err)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("edge %q: problem shows the credential: %v", ep, err)
		}
		_, err = LoadNode(writeFile(t, "node.yaml", "edge: {address: 'e:1'}\nnode: {id: n, token: t}\n"+y))
		if err == nil || !strings.Contains(err.Error(), "tracing.endpoint") {
			t.Errorf("node %q: err = %v, want a tracing.endpoint problem", ep, err)
		}
	}
	// Disabled, the endpoint is not used and not checked; host:port passes.
	for _, y := range []string{"tracing: {enabled: false, endpoint: 'http://c:4318'}\n", "tracing: {enabled: true, endpoint: 'collector:4318'}\n", "tracing: {enabled: true, endpoint: '[::1]:4318'}\n"} {
		if _, err := LoadEdge(writeFile(t, "edge.yaml", y)); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
}
