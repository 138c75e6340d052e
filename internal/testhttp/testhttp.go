// Package testhttp holds HTTP fixtures shared by the adapters' tests.
package testhttp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Elsewhere starts a server on another host name (localhost, where the
// servers under test are 127.0.0.1) and returns its URL and a channel that
// receives the headers of the first request to reach it: a redirect target
// that must never be reached.
func Elsewhere(t testing.TB) (url string, reached <-chan http.Header) {
	t.Helper()
	got := make(chan http.Header, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Clone():
		default:
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	return strings.Replace(other.URL, "127.0.0.1", "localhost", 1), got
}
