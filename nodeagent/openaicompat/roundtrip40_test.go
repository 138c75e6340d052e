package openaicompat

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Tunnels and runs go through adapter.RoundTrip, past http.Client: that
// holds only while the client adds nothing a request needs. A client
// given an overall timeout or a cookie jar would have it silently
// skipped; this test says so first.
func TestClientAddsNothingRoundTripSkips40(t *testing.T) {
	for _, kind := range []string{TypeOpenAICompat, TypeVLLM} {
		in := newTestInstance(t, kind, &iop.AdapterConfig{BaseUrl: "http://h/v1"})
		c := in.client
		if c.Timeout != 0 || c.Jar != nil {
			t.Errorf("%s: client has Timeout %v, Jar %v: adapter.RoundTrip would skip them", kind, c.Timeout, c.Jar)
		}
		if c.CheckRedirect == nil || c.CheckRedirect(nil, nil) == nil {
			t.Errorf("%s: client follows redirects; adapter.RoundTrip never does", kind)
		}
	}
}
