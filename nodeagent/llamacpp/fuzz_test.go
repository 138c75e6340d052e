package llamacpp

import (
	"math"
	"strings"
	"testing"
)

// FuzzParseMetrics: whatever a /metrics answer holds, parsing it never
// panics and yields only finite values under names without labels or
// blanks; a well-formed sample line is read as written.
func FuzzParseMetrics(f *testing.F) {
	for _, s := range []string{
		metricsText,
		"llamacpp:kv_cache_usage_ratio NaN\nllamacpp:requests_processing +Inf\nllamacpp:requests_deferred -Inf\n",
		"llamacpp:requests_processing{slot=\"0 1\"} 2 1733000000000\n",
		"# HELP x\n#\n\n  \t\r\nllamacpp:requests_deferred 1e+06\r\n",
		"{",
		"llamacpp:requests_processing",
		"\xff\xfe 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := parseMetrics(b)
		for name, v := range m {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%q = %v", name, v)
			}
			if name == "" || strings.ContainsAny(name, "{ \t\r\n") {
				t.Fatalf("name %q", name)
			}
		}
		// Appending a plain sample after the fuzzed text reads it back.
		m = parseMetrics(append(append([]byte(nil), b...), "\nllamacpp:requests_deferred 7\n"...))
		if m["llamacpp:requests_deferred"] != 7 {
			t.Fatalf("trailing sample read as %v", m["llamacpp:requests_deferred"])
		}
	})
}

// FuzzParseSlots: whatever a /slots answer holds, counting never panics
// and a count it reports is one a server could have (0 <= busy <= total,
// total > 0).
func FuzzParseSlots(f *testing.F) {
	for _, s := range []string{
		slotsJSON(true, false),
		slotsJSON(true, true, true),
		olderSlotsJSON(1, 0),
		slotsNoSupport,
		`[]`, `[{}]`, `[null]`, `[{"is_processing":1}]`, `{"is_processing":true}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		busy, total, ok := parseSlots(b)
		if ok && (total <= 0 || busy < 0 || busy > total) {
			t.Fatalf("busy %d of %d", busy, total)
		}
		if !ok && (busy != 0 || total != 0) {
			t.Fatalf("not ok but busy %d of %d", busy, total)
		}
	})
}
