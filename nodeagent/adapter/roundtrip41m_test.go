package adapter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type roundTripFunc41m func(*http.Request) (*http.Response, error)

func (f roundTripFunc41m) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// RoundTrip hands the request to the client's own transport (an
// adapter's carries its dial, header and pool bounds), not to
// http.DefaultTransport, and answers with what that transport returned.
func TestRoundTripUsesTheClientsTransport41m(t *testing.T) {
	var seen *http.Request
	c := &http.Client{Transport: roundTripFunc41m(func(r *http.Request) (*http.Response, error) {
		seen = r
		return &http.Response{StatusCode: http.StatusTeapot, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("own")), Request: r}, nil
	})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "server") }))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := RoundTrip(c, req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if seen != req || resp.StatusCode != http.StatusTeapot || string(body) != "own" {
		t.Fatalf("answer %d %q (request seen: %v), want the client's transport's", resp.StatusCode, body, seen == req)
	}
}
