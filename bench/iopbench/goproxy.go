//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// goproxyIdlePerHost keeps every upstream connection of the largest stream
// count (10,000 in the steps and the memory phase) for reuse, as nginx's
// keepalive pool and the node's transport do: a lower limit would close
// and redial connections after each burst and charge the proxy for dials
// nginx does not make.
const goproxyIdlePerHost = 16384

// serveGoproxy is the -goproxy child: net/http/httputil.ReverseProxy, one
// hop, in front of upstream (host:port or http URL). It is the floor a Go
// gateway with one hop reaches on this machine, next to nginx and iop's two
// hops. It prints GOPROXY_ADDR on stdout and serves like the mock.
func serveGoproxy(upstream string) int {
	if !strings.Contains(upstream, "://") {
		upstream = "http://" + upstream
	}
	target, err := url.Parse(upstream)
	if err != nil || target.Host == "" {
		fmt.Fprintf(os.Stderr, "goproxy: upstream %q: want host:port or http://host:port\n", upstream)
		return 1
	}
	return serveChild("goproxy", "GOPROXY_ADDR", &http.Server{
		Handler:           newGoproxy(target),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	})
}

// newGoproxy is the proxy's handler. Each request is served full duplex:
// otherwise net/http drains and closes the request body when the proxy
// writes the response head, which races with the transport still reading
// that body for its end-of-body check ("http: invalid Read on closed
// Body"); the transport then closes the upstream connection mid-answer, and
// a fast upstream (the mock answers before the last read) makes that a
// failed stream now and then.
func newGoproxy(target *url.URL) http.Handler {
	rp := newReverseProxy(target)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
}

func newReverseProxy(target *url.URL) *httputil.ReverseProxy {
	var logOnce sync.Once
	return &httputil.ReverseProxy{
		// SetURL also sets Host to the upstream's, as nginx's proxy_pass
		// does; Rewrite (unlike Director) drops hop-by-hop headers and adds
		// no X-Forwarded-* headers, and nginx adds none here either.
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        0, // no overall limit
			MaxIdleConnsPerHost: goproxyIdlePerHost,
			IdleConnTimeout:     120 * time.Second,
			// Relay bytes as they come: no Accept-Encoding added, nothing
			// decompressed on the way.
			DisableCompression: true,
			ForceAttemptHTTP2:  false,
		},
		// Flush after every write, like nginx's proxy_buffering off: a
		// streamed chunk reaches the client as soon as the mock sends it.
		FlushInterval: -1,
		// The copy buffers are reused, as any Go gateway tuned for
		// throughput would, instead of 32 KB allocated per request.
		BufferPool: &bufferPool{p: sync.Pool{New: func() any { return new([proxyBuffer]byte) }}},
		// No log per request: a client that leaves (cancelled hold streams)
		// is not an error, and upstream errors reach the load generator as
		// 502s, where they are counted. The first one is logged for -keep.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return
			}
			logOnce.Do(func() { fmt.Fprintln(os.Stderr, "goproxy: first proxy error:", err) })
			w.WriteHeader(http.StatusBadGateway)
		},
	}
}

// proxyBuffer is the size of the reference proxy's copy buffers, as
// httputil's default.
const proxyBuffer = 32 << 10

// bufferPool is an httputil.BufferPool over sync.Pool. It pools array
// pointers, so that a Put allocates no slice header: the reference is not
// charged an allocation per copy that a careful proxy would not make.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte { return b.p.Get().(*[proxyBuffer]byte)[:] }

func (b *bufferPool) Put(x []byte) {
	if len(x) == proxyBuffer {
		b.p.Put((*[proxyBuffer]byte)(x))
	}
}
