package h1client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// NewRequest is http.NewRequestWithContext for a body held in memory, with
// a body that is let go of once sent. A transport keeps the request for as
// long as its response is read — in Response.Request, and net/http's
// Transport in its own bookkeeping — and with a *bytes.Reader body that
// keeps the bytes too: for an LLM request the whole prompt, for a stream's
// whole life. Here each reader drops its bytes at EOF or Close, and the
// copy kept for resends (GetBody) is dropped by release, which the caller
// calls once Do has returned (no resend follows: http.Client follows
// redirects and transports retry inside Do). An empty body is no body.
func NewRequest(ctx context.Context, method, url string, body []byte) (req *http.Request, release func(), err error) {
	if len(body) == 0 {
		req, err = http.NewRequestWithContext(ctx, method, url, nil)
		return req, func() {}, err
	}
	held := &heldBody{b: body}
	req, err = http.NewRequestWithContext(ctx, method, url, held.reader())
	if err != nil {
		return nil, nil, err
	}
	req.ContentLength = int64(len(body))
	req.GetBody = held.getBody
	return req, held.release, nil
}

// errBodyReleased is GetBody's error after release.
var errBodyReleased = errors.New("h1client: request body released after the response")

// heldBody is the body kept for resends until release.
type heldBody struct {
	mu sync.Mutex
	b  []byte // guarded by mu; nil once released
}

func (h *heldBody) reader() *onceReader {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &onceReader{b: h.b}
}

// getBody is the request's GetBody. After release there is nothing to
// resend; no transport asks then (see NewRequest).
func (h *heldBody) getBody() (io.ReadCloser, error) {
	r := h.reader()
	if r.b == nil {
		return nil, errBodyReleased
	}
	return r, nil
}

func (h *heldBody) release() {
	h.mu.Lock()
	h.b = nil
	h.mu.Unlock()
}

// onceReader reads its bytes once and drops them at the end or on Close.
// Read and Close may be called concurrently (a transport closes a request
// body from another goroutine than the one writing it).
type onceReader struct {
	mu sync.Mutex
	b  []byte // guarded by mu: what is left to read; nil at the end
}

func (r *onceReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.b) == 0 {
		r.b = nil
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 {
		r.b = nil
	}
	return n, nil
}

func (r *onceReader) Close() error {
	r.mu.Lock()
	r.b = nil
	r.mu.Unlock()
	return nil
}
