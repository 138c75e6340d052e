package gateway

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// The fixed headers of the edge's event streams cost no allocation per
// stream: their values are shared slices, so the handler's header map
// holds nothing of its own for them while the stream is held (Header.Set
// made a one-element slice per header and stream).
func TestSSEHeadersAllocateNothing(t *testing.T) {
	h := make(http.Header, 8)
	if n := testing.AllocsPerRun(100, func() {
		clear(h)
		setSSEHeaders(h)
	}); n != 0 {
		t.Fatalf("setSSEHeaders: %.0f allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		clear(h)
		setNoBuffering(h)
	}); n != 0 {
		t.Fatalf("setNoBuffering: %.0f allocations, want 0", n)
	}
	for name, want := range map[string]string{"Content-Type": sseType, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		setSSEHeaders(h)
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s %q, want %q", name, got, want)
		}
	}
}

// Sharing the values is safe: a handler that adds to one of those headers
// after setting them, and net/http writing the head, leave the shared
// values as they were for every other stream.
func TestSSEHeaderValuesStayShared(t *testing.T) {
	want := [][]string{{sseType}, {"no-cache"}, {"no"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		setSSEHeaders(h)
		h.Add("Cache-Control", "private")
		h.Add("X-Accel-Buffering", "yes")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("data: x\n\n"))
		w.(http.Flusher).Flush()
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got := resp.Header.Values("Cache-Control"); !slices.Equal(got, []string{"no-cache", "private"}) {
		t.Fatalf("Cache-Control %q", got)
	}
	for i, got := range [][]string{sseTypeValues, noCacheValues, noBufferingValues} {
		if !slices.Equal(got, want[i]) || cap(got) != 1 {
			t.Fatalf("a shared header value changed: %q (capacity %d), want %q", got, cap(got), want[i])
		}
	}
}
