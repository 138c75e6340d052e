//go:build linux

package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/iop-gateway/iop/bench/mockup"
)

// startMock serves mockup.Handler on loopback until the test ends. The mock
// takes its connections over from net/http (hijacks them) and serves them
// until the client closes them; httptest's Close does not close hijacked
// connections, and a client that keeps them idle (the goproxy's transport,
// which the test cannot reach) would leave both ends' goroutines behind.
// Cleanup closes them after the server.
func startMock(t *testing.T) *httptest.Server {
	t.Helper()
	mock := httptest.NewUnstartedServer(mockup.Handler())
	var mu sync.Mutex
	var hijacked []net.Conn // guarded by mu: one per connection the test made
	mock.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			mu.Lock()
			hijacked = append(hijacked, c)
			mu.Unlock()
		}
	}
	mock.Start()
	t.Cleanup(func() {
		mock.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range hijacked {
			_ = c.Close()
		}
	})
	return mock
}
