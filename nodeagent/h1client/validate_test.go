package h1client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// A request net/http's Transport refuses to send (a method that is not a
// token, a header field name or value it cannot carry) is refused here
// too, before it reaches the upstream: Request.Write copies the method
// into the request line as is, so "GET / HTTP/1.1\r\n…" would smuggle a
// request of its own, and it copies control bytes of a value other than
// CR and LF.
func TestInvalidRequestIsNotSent(t *testing.T) {
	for name, mod := range map[string]func(*http.Request){
		"smuggling method": func(r *http.Request) { r.Method = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET" },
		"space in method":  func(r *http.Request) { r.Method = "GET /a" },
		"NUL in value":     func(r *http.Request) { r.Header.Set("X-A", "a\x00b") },
		"DEL in value":     func(r *http.Request) { r.Header["X-A"] = []string{"a\x7fb"} },
		"CRLF in value":    func(r *http.Request) { r.Header["X-A"] = []string{"a\r\nX-B: b"} },
		"bad field name":   func(r *http.Request) { r.Header["X A"] = []string{"b"} },
		"bad trailer":      func(r *http.Request) { r.Trailer = http.Header{"X-T": {"a\x00"}} },
	} {
		t.Run(name, func(t *testing.T) {
			var received atomic.Int64
			u, _ := rawServer(t, func(_ int, c net.Conn) {
				n, _ := io.Copy(io.Discard, c)
				received.Add(n)
			})
			ref, rerr := (&http.Transport{}).RoundTrip(invalidRequest(u, mod))
			if rerr == nil {
				ref.Body.Close()
				t.Fatal("net/http sent it: the case is wrong")
			}
			tr := New(Options{})
			defer tr.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			resp, err := tr.RoundTrip(invalidRequest(u, mod).WithContext(ctx))
			if err == nil {
				resp.Body.Close()
			}
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("an invalid request was sent: %v", err)
			}
			tr.Close()
			time.Sleep(10 * time.Millisecond) // let the server count what came
			if n := received.Load(); n != 0 {
				t.Fatalf("the upstream received %d bytes", n)
			}
		})
	}
}

func invalidRequest(u string, mod func(*http.Request)) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, u+"/b", nil)
	mod(req)
	return req
}
