package config

import "testing"

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
