package h1client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// transportVerdict is what a client made of one answer: whether the round
// trip succeeded, the status, the body read through Read and whether it
// ended cleanly, and whether a second request reused the connection.
type transportVerdict struct {
	roundTrip bool
	status    int
	body      string
	ok        bool
	reused    bool
}

// answerWith runs one POST against a raw loopback server that answers it
// with answer (in two writes, cut at split) and every later request on the
// connection with a 204, then a GET, through rt; the server closes a
// connection on which no request follows within 100 ms (which ends a
// close-delimited or cut-off answer).
func answerWith(t *testing.T, rt http.RoundTripper, answer []byte, split int) (transportVerdict, error) {
	t.Helper()
	var answered atomic.Bool
	u, accepted := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := readRequest(br); err != nil {
				return
			}
			if answered.Swap(true) {
				io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
				continue
			}
			cut := min(split, len(answer))
			c.Write(answer[:cut])
			time.Sleep(time.Millisecond)
			c.Write(answer[cut:])
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{"a":1}`))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("the answer %q held the round trip until its deadline", answer)
		}
		return transportVerdict{}, err
	}
	var got strings.Builder
	_, err = io.Copy(&got, readOnly{resp.Body})
	resp.Body.Close()
	if ctx.Err() != nil {
		t.Fatalf("the answer %q held the body until its deadline", answer)
	}
	v := transportVerdict{roundTrip: true, status: resp.StatusCode, body: got.String(), ok: err == nil}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if resp, err := rt.RoundTrip(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	v.reused = accepted.Load() == 1
	return v, nil
}

// FuzzTransportMatchesNetHTTP sends the same answer to this transport and
// to net/http's, both reading the body through Read: the round trip must
// succeed and fail alike, give the same status and body bytes, and end
// the body cleanly or not alike. The connection may be kept only where
// net/http keeps it (net/http keeps some that this transport closes:
// bytes beyond a body's end, which it would read as the next answer).
// Difference by design: a 101 (net/http hands over the connection).
func FuzzTransportMatchesNetHTTP(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 20x OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 103 Early Hints\r\nContent-Length: 2\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", 7) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(20))
	}
	f.Fuzz(func(t *testing.T, answer []byte, split uint8) {
		ref := &http.Transport{DisableCompression: true, MaxResponseHeaderBytes: 4 << 10}
		defer ref.CloseIdleConnections()
		want, werr := answerWith(t, ref, answer, int(split))
		if werr == nil && want.status == http.StatusSwitchingProtocols {
			return
		}
		tr := New(Options{MaxResponseHeaderBytes: 4 << 10})
		defer tr.Close()
		got, gerr := answerWith(t, tr, answer, int(split))
		if got.reused && !want.reused {
			t.Errorf("answer %q: the connection was kept, net/http closes it", answer)
		}
		got.reused, want.reused = false, false
		if got != want {
			t.Errorf("answer %q split at %d:\n net/http %+v (%v)\n h1client %+v (%v)", answer, split, want, werr, got, gerr)
		}
	})
}
