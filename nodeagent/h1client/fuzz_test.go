package h1client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzResponse feeds arbitrary bytes as an upstream's answer: the client
// must return an error or a response whose body ends, within the request's
// deadline, never panic, and never keep a connection whose answer did not
// end cleanly.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nTrailer: x\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\ne\r\ndata: {\"a\":1}\n\n\r\n0\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		var tr *Transport
		tr = New(Options{
			MaxResponseHeaderBytes: 4 << 10,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				client, server := net.Pipe()
				// Owner: this dial; stops when the answer is written or the
				// client side closes the pipe.
				go func() {
					defer server.Close()
					br := bufio.NewReader(server)
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					server.Write(answer)
				}()
				return client, nil
			},
		})
		defer tr.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/v1/chat/completions", strings.NewReader(`{"a":1}`))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return
		}
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if ctx.Err() != nil {
			t.Fatalf("the answer %q held the client until its deadline", answer)
		}
		_ = err
	})
}
