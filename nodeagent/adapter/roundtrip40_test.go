package adapter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// RoundTrip answers with the provider's own 3xx (never followed, as
// NoRedirect has it), relays any other answer as it came, and ends a
// request whose context ends.
func TestRoundTripAnswersAsTheProviderDid40(t *testing.T) {
	var followed atomic.Int32
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "answer") })
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)

	for _, c := range []*http.Client{{Transport: srv.Client().Transport}, {}} { // {}: http.DefaultTransport
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/moved", nil)
		resp, err := RoundTrip(c, req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "/elsewhere" {
			t.Errorf("redirect answered %d (Location %q), want the provider's 307", resp.StatusCode, resp.Header.Get("Location"))
		}

		req, _ = http.NewRequest(http.MethodGet, srv.URL+"/ok", nil)
		resp, err = RoundTrip(c, req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "answer" {
			t.Errorf("answer: %d %q", resp.StatusCode, body)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hang", nil)
		_, err = RoundTrip(c, req)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a request past its context's deadline: %v, want context.DeadlineExceeded", err)
		}
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}
