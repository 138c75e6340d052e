package openaicompat

import (
	"net/http"
	"reflect"
	"testing"
)

// A response's headers lose their hop-by-hop fields and those its
// Connection header nominates, keep every other value in order, and are
// filtered in place: no copy of the map per request.
func TestResponseHeadersFilteredInPlace40(t *testing.T) {
	h := http.Header{
		"Connection":   {"X-Hop, close"},
		"X-Hop":        {"1"},
		"Keep-Alive":   {"timeout=5"},
		"Content-Type": {"text/event-stream"},
		"X-Lower":      {"b"},
		"x-lower":      {"a"}, // hand-built, not canonical: joins its canonical form
		"Set-Cookie":   {"a=1", "b=2"},
	}
	got := responseHeaders(h)
	want := http.Header{
		"Content-Type": {"text/event-stream"},
		"X-Lower":      {"b", "a"},
		"Set-Cookie":   {"a=1", "b=2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("responseHeaders = %v, want %v", got, want)
	}
	if reflect.ValueOf(got).UnsafePointer() != reflect.ValueOf(h).UnsafePointer() {
		t.Error("responseHeaders copied the map; it filters the response's own in place")
	}

	vllm := func() http.Header {
		return http.Header{"Content-Type": {"application/json"}, "Date": {"Mon, 07 Dec 2026 19:00:00 GMT"}, "Server": {"uvicorn"}}
	}
	hs := make([]http.Header, 0, 101)
	for range 101 {
		hs = append(hs, vllm())
	}
	i := 0
	if a := testing.AllocsPerRun(100, func() { responseHeaders(hs[i]); i++ }); a != 0 {
		t.Errorf("filtering a vLLM answer's headers allocates %.0f times, want none", a)
	}
}
