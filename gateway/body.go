package gateway

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// readDeadline bounds reading a request's body by limits.read_timeout_sec
// from the moment its headers were read, whoever reads it: the handler, or
// net/http draining what a handler left unread. A client sending its body
// at a byte a second is cut off at the deadline instead of holding a
// connection and a goroutine forever.
//
// The deadline is the connection's read deadline, so it is cleared as soon
// as the body has been read to its end: net/http then keeps a background
// read on the connection for the rest of the request, and a deadline
// passing there would cancel a long stream's request context. Requests
// without a body get no deadline for the same reason.
func (s *Server) readDeadline(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	timeout := time.Duration(s.limits.Load().ReadTimeoutSec) * time.Second
	if timeout <= 0 {
		return
	}
	rc := http.NewResponseController(c.Writer)
	if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
		return // not a net/http connection (tests with a recorder)
	}
	b := &deadlineBody{ReadCloser: r.Body, rc: rc}
	r.Body = b
	in := info(c)
	in.body = b
	c.Next()
	// After the handlers and the access log: an early answer is logged
	// before its connection lingers.
	if in.linger {
		b.linger(c)
	}
}

// identityCoded reports whether a request body has no content coding: no
// Content-Encoding, or only "identity" (RFC 9110 §8.4 lists codings in
// the order applied; identity is none).
func identityCoded(h http.Header) bool {
	for _, line := range h.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(line, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return false
			}
		}
	}
	return true
}

// deadlineBody clears the connection's read deadline once the body has been
// read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	eof atomic.Bool
	// failed: a read already failed (the read timeout passed, the client
	// hung up); there is nothing to linger for.
	failed atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		if !b.eof.Swap(true) {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	default:
		b.failed.Store(true)
	}
	return n, err
}

// Lingering after an early answer: how long, and how many bytes of the
// unread body, the edge reads and discards before closing.
const (
	lingerTimeout = 2 * time.Second
	lingerBytes   = 32 << 20
)

// abandon is for a request answered before its body was read (bad key,
// unknown model, too large): the connection closes after the answer
// instead of net/http reading on to the end of a body of any size at any
// pace. Call it before writing the answer, and linger after.
func (b *deadlineBody) abandon(c *gin.Context) bool {
	if b.eof.Load() {
		return false
	}
	c.Header("Connection", "close")
	return true
}

// linger sends the answer already written and then reads and discards the
// rest of the body for a short, bounded while before the connection
// closes, as nginx's lingering close does: closing a socket with unread
// data resets it, and a client still sending its body would see the reset
// instead of the 401 or 413. Whatever is still unread after lingerTimeout
// or lingerBytes is not waited for.
func (b *deadlineBody) linger(c *gin.Context) {
	_ = b.rc.Flush()
	if b.failed.Load() {
		_ = b.rc.SetReadDeadline(time.Now())
		return
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(lingerTimeout))
	_, _ = io.CopyN(io.Discard, b.ReadCloser, lingerBytes)
	// net/http's own drain of what is left must not wait either.
	_ = b.rc.SetReadDeadline(time.Now())
}

// eagerBody is how much of a declared Content-Length readAll allocates
// before the bytes arrive: a client that declares a large body and sends
// little costs little memory (the node wire's rule for frames, too).
const eagerBody = 64 << 10

// readAll is io.ReadAll sized for a request body of declared bytes
// (ContentLength: -1 unknown). io.ReadAll starts at 512 bytes and grows by
// append's factor, allocating about 2.5 times a 32 KiB prompt in discarded
// arrays; here a body of known length up to eagerBody is read into one
// slice of its size, and a larger or unknown one doubles from there, never
// past the declared length, so what is allocated stays within twice what
// arrived. It reads to EOF: that clears the read deadline and starts
// net/http's background read, which notices a client hanging up (see
// readDeadline).
func readAll(r io.Reader, declared int64) ([]byte, error) {
	size := 512
	if declared > 0 {
		size = int(min(declared, eagerBody))
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			// Full at the declared length: probe for the EOF with one
			// byte of its own rather than growing the slice for it.
			if int64(len(b)) == declared {
				var probe [1]byte
				n, err := r.Read(probe[:])
				if n == 0 && err == io.EOF {
					return b, nil
				}
				b = append(b, probe[:n]...) // more than declared: read on, growing
				if err != nil {
					return readEnd(b, err)
				}
				continue
			}
			grown := 2 * cap(b)
			if declared > int64(len(b)) {
				grown = int(min(int64(grown), declared))
			}
			b = append(make([]byte, 0, grown), b...)
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			return readEnd(b, err)
		}
	}
}

// readEnd is readAll's answer to a read error: io.EOF is the end (the
// io.Reader contract returns it unwrapped), anything else a failure.
func readEnd(b []byte, err error) ([]byte, error) {
	if err == io.EOF {
		return b, nil
	}
	return b, err
}
