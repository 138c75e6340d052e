// Package h1client is the node's HTTP/1.1 client for plain-HTTP upstreams
// (a vLLM or OpenAI-style server next to the GPUs). It is an
// http.RoundTripper that does the work of http.Transport for that one case
// in the calling goroutine: the request is written with (*http.Request).Write
// and the answer parsed with http.ReadResponse, the standard library's own
// wire code, over a pool of kept-alive connections. A body is read through
// net/http's framing (Read), or pushed as it arrives (WriteTo, which
// io.Copy and the node's relays use): then its framing is decoded by this
// package's decoder, held to net/http's by a fuzzed model test. A request
// body over 64 KiB, or of unknown length, is the exception: it is written
// from a goroutine of its own while the answer is read, as http.Transport
// does, so that an upstream that answers before reading it all is heard
// (and the connection, its request not written whole, is not reused).
//
// Why not http.Transport: it gives every connection a read goroutine and a
// write goroutine and hands each request and response between them and the
// caller over channels. For a gateway node that holds thousands of streams
// open that is two parked goroutines and two 4 KiB buffers per stream, and
// several goroutine switches per request; here a held stream is the
// caller's goroutine and one connection, with no read buffer while it is
// pushed.
//
// Everything else (https, HTTP/2, a proxy from the environment, protocol
// upgrades) goes to the Fallback transport unchanged.
package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of Options' zero values.
const (
	DefaultDialTimeout            = 10 * time.Second
	DefaultKeepAlive              = 30 * time.Second
	DefaultMaxIdlePerHost         = 256
	DefaultIdleTimeout            = 90 * time.Second
	DefaultMaxResponseHeaderBytes = 1 << 20
	DefaultReadBufferSize         = 4 << 10
)

// Errors a caller can test for with errors.Is.
var (
	// ErrHeaderTooLarge: the response head exceeded MaxResponseHeaderBytes.
	ErrHeaderTooLarge = errors.New("h1client: response headers too large")
	// ErrUnsupportedStatus: the upstream answered 101 Switching Protocols,
	// which only the fallback transport handles.
	ErrUnsupportedStatus = errors.New("h1client: unsupported 101 switching protocols")
	// ErrBodyClosed: Read after Close.
	ErrBodyClosed = errors.New("h1client: read on closed response body")
)

// Options configure a Transport. Zero values take the defaults above.
type Options struct {
	// Fallback carries every request this transport does not handle
	// itself. nil: http.DefaultTransport.
	Fallback http.RoundTripper
	// Proxy, when set, is asked for each plain-HTTP request; a request it
	// routes through a proxy goes to Fallback (which must then have the
	// same Proxy). nil: no proxy.
	Proxy func(*http.Request) (*url.URL, error)
	// DialContext opens connections; nil: a net.Dialer with DialTimeout
	// and KeepAlive.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTimeout bounds a dial (≤ 0: DefaultDialTimeout).
	DialTimeout time.Duration
	// KeepAlive is the TCP keep-alive period (0: DefaultKeepAlive;
	// negative: off).
	KeepAlive time.Duration
	// MaxIdlePerHost bounds the idle connections kept per host:port
	// (≤ 0: DefaultMaxIdlePerHost). Busy connections are not bounded here:
	// the node's capacity gate bounds them.
	MaxIdlePerHost int
	// IdleTimeout closes a connection idle this long (≤ 0:
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxResponseHeaderBytes bounds the status lines and headers of one
	// response, its 1xx responses included (≤ 0:
	// DefaultMaxResponseHeaderBytes).
	MaxResponseHeaderBytes int64
	// ReadBufferSize is the read buffer a connection holds while it reads
	// a response head, and a body through Read (≤ 0:
	// DefaultReadBufferSize).
	ReadBufferSize int
	// StreamCheckInterval is how long a body read through WriteTo waits
	// for the upstream's next bytes before it reads once more anyway (≤ 0:
	// DefaultStreamCheckInterval).
	StreamCheckInterval time.Duration
}

// Transport is an http.RoundTripper for plain HTTP/1.1. Safe for
// concurrent use; Close (or CloseIdleConnections) releases idle
// connections.
type Transport struct {
	fallback    http.RoundTripper
	proxy       func(*http.Request) (*url.URL, error)
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int
	idleTimeout time.Duration
	maxHeader   int64
	readBuf     int
	streamCheck time.Duration
	readers     sync.Pool // of *bufio.Reader of readBuf bytes, for response heads

	mu     sync.Mutex
	idle   map[string][]*conn // guarded by mu; per host:port, oldest first
	nidle  int                // guarded by mu; conns in idle
	reaper *time.Timer        // guarded by mu; armed while nidle > 0
	// closeIdle: CloseIdleConnections came and no request since, so a
	// connection whose answer ends is closed, not kept (net/http's rule).
	// Guarded by mu.
	closeIdle bool
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport with o's settings.
func New(o Options) *Transport {
	t := &Transport{
		fallback:    o.Fallback,
		proxy:       o.Proxy,
		dial:        o.DialContext,
		maxIdle:     o.MaxIdlePerHost,
		idleTimeout: o.IdleTimeout,
		maxHeader:   o.MaxResponseHeaderBytes,
		readBuf:     o.ReadBufferSize,
		streamCheck: o.StreamCheckInterval,
		idle:        map[string][]*conn{},
	}
	if t.fallback == nil {
		t.fallback = http.DefaultTransport
	}
	if t.dial == nil {
		d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: o.KeepAlive}
		if d.Timeout <= 0 {
			d.Timeout = DefaultDialTimeout
		}
		if d.KeepAlive == 0 {
			d.KeepAlive = DefaultKeepAlive
		}
		t.dial = d.DialContext
	}
	if t.maxIdle <= 0 {
		t.maxIdle = DefaultMaxIdlePerHost
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = DefaultIdleTimeout
	}
	if t.maxHeader <= 0 {
		t.maxHeader = DefaultMaxResponseHeaderBytes
	}
	if t.readBuf <= 0 {
		t.readBuf = DefaultReadBufferSize
	}
	if t.streamCheck <= 0 {
		t.streamCheck = DefaultStreamCheckInterval
	}
	return t
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.fallback.RoundTrip(req)
	}
	if err := validateRequest(req); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	key := hostPort(req.URL)
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		c, err := t.getConn(ctx, key)
		if err != nil {
			closeRequestBody(req)
			return nil, err
		}
		resp, err := t.exchange(c, req)
		if err == nil {
			return resp, nil
		}
		// One retry, on a fresh connection, when a kept-alive one turned
		// out dead under our request (the upstream closed it while idle):
		// with the rules of http.Transport, only when the request provably
		// did not reach the upstream or is safe to send twice.
		var re *retryable
		if attempt > 0 || !c.reused || !errors.As(err, &re) || !re.ok(req) || ctx.Err() != nil {
			closeRequestBody(req)
			return nil, unwrapRetryable(err)
		}
		if req, err = rewind(req); err != nil {
			return nil, err
		}
	}
}

// handles reports whether the request is plain HTTP/1.1 this transport
// sends itself.
func (t *Transport) handles(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" || req.Method == http.MethodConnect {
		return false
	}
	if req.Header.Get("Upgrade") != "" {
		return false
	}
	if t.proxy != nil {
		if u, err := t.proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// CloseIdleConnections closes every idle connection, here and in the
// fallback transport, and those that become idle until the next request
// (an answer read after it must not keep its upstream's connection).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.nidle = map[string][]*conn{}, 0
	t.closeIdle = true
	if t.reaper != nil {
		t.reaper.Stop()
		t.reaper = nil
	}
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.close()
		}
	}
	if ci, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// Close is CloseIdleConnections; requests in flight finish.
func (t *Transport) Close() error {
	t.CloseIdleConnections()
	return nil
}

// getConn returns a live idle connection to key, or dials one.
func (t *Transport) getConn(ctx context.Context, key string) (*conn, error) {
	for {
		c := t.popIdle(key)
		if c == nil {
			break
		}
		// The upstream may have closed it while it sat idle (uvicorn's
		// keep-alive timeout is 5 s): find out now rather than by losing
		// the request on it.
		if !c.alive() {
			c.close()
			continue
		}
		c.reused = true
		return c, nil
	}
	nc, err := t.dial(ctx, "tcp", key)
	if err != nil {
		return nil, fmt.Errorf("h1client: dial %s: %w", key, err)
	}
	return newConn(nc, key), nil
}

// popIdle takes the most recently used idle connection to key that has not
// outlived the idle timeout. A request wants connections kept again, after
// CloseIdleConnections.
func (t *Transport) popIdle(key string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeIdle = false
	cs := t.idle[key]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	t.idle[key] = cs[:len(cs)-1]
	t.nidle--
	return c
}

// putIdle keeps c for reuse, or closes it when key's idle list is full or
// idle connections are being closed.
func (t *Transport) putIdle(c *conn) {
	c.idleAt = time.Now()
	t.mu.Lock()
	if t.closeIdle || len(t.idle[c.key]) >= t.maxIdle {
		t.mu.Unlock()
		c.close()
		return
	}
	t.idle[c.key] = append(t.idle[c.key], c)
	t.nidle++
	if t.reaper == nil {
		// Owner: the Transport; the timer's function runs once per period
		// and re-arms only while idle connections remain.
		t.reaper = time.AfterFunc(t.idleTimeout, t.reap)
	}
	t.mu.Unlock()
}

// reap closes connections idle longer than the idle timeout.
func (t *Transport) reap() {
	now := time.Now()
	var expired []*conn
	t.mu.Lock()
	next := time.Duration(-1)
	for key, cs := range t.idle {
		i := 0
		for i < len(cs) && now.Sub(cs[i].idleAt) >= t.idleTimeout {
			i++
		}
		expired = append(expired, cs[:i]...)
		t.nidle -= i
		if rest := cs[i:]; len(rest) > 0 {
			// The oldest kept connection sets the next round; read it
			// before the move below overwrites (and clears) rest's slots.
			if d := t.idleTimeout - now.Sub(rest[0].idleAt); next < 0 || d < next {
				next = d
			}
			t.idle[key] = append(cs[:0], rest...)
			clear(cs[len(rest):])
		} else {
			delete(t.idle, key)
		}
	}
	if next >= 0 {
		t.reaper = time.AfterFunc(next, t.reap)
	} else {
		t.reaper = nil
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.close()
	}
}

// IdleConns reports how many idle connections are kept (for tests and
// status).
func (t *Transport) IdleConns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nidle
}

// exchange writes req on c and reads the response head. On error c is
// closed; the error is *retryable when the caller may resend.
func (t *Transport) exchange(c *conn, req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		c.close()
		return nil, err
	}
	// A cancelled request unblocks whatever the connection is doing; the
	// connection is then never reused.
	stop := context.AfterFunc(ctx, c.interrupt)
	c.r.n = 0
	c.w.n, c.w.err = 0, nil
	c.takeReader(t)
	var job *writeJob
	if writesConcurrently(req) {
		// A large body is written while the answer is awaited, as
		// http.Transport does: an upstream may answer (413, 401, 400)
		// without reading the rest of it, and must not then keep the
		// request waiting on a write that cannot complete.
		job = &writeJob{req: req, done: make(chan error, 1)}
		// Owner: this exchange; ends when the request is written or the
		// connection fails (a closed or interrupted connection fails a
		// blocked write) or the request body is closed (a blocked read of
		// it: exchange's error path and the body's finish close it). Its
		// result is taken by exchange on an error and by the body's
		// finish otherwise.
		go job.run(c, req)
	} else if err := writeRequest(c, req); err != nil {
		stop()
		c.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err = fmt.Errorf("h1client: write request: %w", err)
		if c.w.n == 0 {
			return nil, &retryable{err: err, nothingWritten: true}
		}
		return nil, err
	}
	resp, err := t.readResponse(c, req)
	if err != nil {
		// Read before the closes below, which fail a write still going.
		failedFirst := job != nil && job.bodyFailed.Load()
		stop()
		c.close()
		var werr error
		if job != nil {
			// The close above ends a write blocked on the socket, and
			// closing the body one blocked reading it.
			closeRequestBody(req)
			werr = <-job.done
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if failedFirst {
			// The request body's own error, as http.Transport reports it.
			return nil, fmt.Errorf("h1client: write request: %w", werr)
		}
		if c.r.n == 0 {
			return nil, &retryable{err: err, nothingWritten: c.w.n == 0}
		}
		return nil, err
	}
	b := &body{t: t, c: c, rc: resp.Body, ctx: ctx, stop: stop, keep: !resp.Close && !req.Close, job: job}
	switch {
	case b.rc == http.NoBody:
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		b.kind = framingChunked
	case resp.ContentLength >= 0:
		b.kind, b.length = framingLength, resp.ContentLength
	default:
		b.kind = framingClose
	}
	resp.Body = b
	if b.rc == http.NoBody {
		// Nothing to read: the connection is free as soon as the head is
		// in, whether or not the caller reads or closes the body.
		b.finish(true)
	}
	return resp, nil
}

// readResponse reads the final response head, skipping 1xx responses. The
// heads read, 1xx ones included, are bounded by maxHeader together, as
// http.Transport bounds them (it no longer counts them): an upstream may
// send a 102 or 103 now and then while it works, and one that sends them
// without end fails at the bound.
func (t *Transport) readResponse(c *conn, req *http.Request) (*http.Response, error) {
	c.r.limit = t.maxHeader
	defer func() { c.r.limit = -1 }()
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			if c.r.hit {
				return nil, ErrHeaderTooLarge
			}
			return nil, fmt.Errorf("h1client: read response: %w", err)
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, ErrUnsupportedStatus
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue
		}
		return resp, nil
	}
}

// concurrentWriteMin: a request body longer than this, or of unknown
// length, is written while the response head is read (see exchange). One
// up to it leaves in one write (writeBuffer) into the socket buffers, which
// hold it whether or not the upstream reads.
const concurrentWriteMin = writeBuffer

func writesConcurrently(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return false
	}
	return req.ContentLength <= 0 || req.ContentLength > concurrentWriteMin
}

// writeJob is a request written concurrently with the response head.
type writeJob struct {
	req  *http.Request
	done chan error // the write's result, once
	// bodyFailed: the write failed on its own, not on the socket (the
	// request body failed to read), and interrupted the connection.
	bodyFailed atomic.Bool
}

func (j *writeJob) run(c *conn, req *http.Request) {
	// req.Write sees the *bufio.Writer itself here: it flushes the head
	// before the body and, for a streamed (chunked) body, after every
	// chunk, so an upstream hears each piece as it comes (one write more
	// than requestWriter's, on a body over 64 KiB anyway).
	bw := getWriter(&c.w)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	putWriter(bw)
	if err != nil && c.w.err == nil {
		// The upstream would wait for the rest of the body: wake the
		// reader.
		j.bodyFailed.Store(true)
		c.interrupt()
	}
	j.done <- err
}

// writeRequest writes req on c through a pooled buffer.
func writeRequest(c *conn, req *http.Request) error {
	bw := getWriter(&c.w)
	err := req.Write(requestWriter{bw})
	if err == nil {
		err = bw.Flush()
	}
	putWriter(bw)
	return err
}

// maxWriteWait is how long a body that ended waits for its request's
// concurrent write to end before the connection is given up instead of
// kept (net/http's maxWriteWaitBeforeConnReuse).
const maxWriteWait = 50 * time.Millisecond

// retryable marks an error after which the request may be sent again on a
// new connection, if ok says so.
type retryable struct {
	err            error
	nothingWritten bool // not one byte of the request left this process
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// ok applies http.Transport's rule: a request none of which was written
// can be resent when its body can be rewound; one the upstream may have
// received only when it is idempotent.
func (r *retryable) ok(req *http.Request) bool {
	rewindable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	if r.nothingWritten {
		return rewindable
	}
	if !rewindable {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

func unwrapRetryable(err error) error {
	var re *retryable
	if errors.As(err, &re) {
		return re.err
	}
	return err
}

// rewind returns a copy of req with a fresh body for a resend.
func rewind(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	b, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("h1client: rewind request body: %w", err)
	}
	r2 := *req
	r2.Body = b
	return &r2, nil
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// writers recycles request write buffers: one is needed only while a
// request is written. A request (head and body) up to writeBuffer bytes
// leaves in one write, larger ones in pieces of that size: an LLM request
// is mostly its prompt, tens of KiB, which a 4 KiB buffer sent in a write
// per 4 KiB.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBuffer) }}

const writeBuffer = 64 << 10

// requestWriter hands req.Write the pooled buffer without letting it see a
// *bufio.Writer. net/http flushes the head on its own before a body it does
// not know to be in memory (NewRequest's bodies are not *bytes.Reader), one
// write more per request; this transport writes the whole request at once
// and flushes after it. Being an io.ByteWriter keeps req.Write from adding
// a buffer of its own.
type requestWriter struct{ *bufio.Writer }

func getWriter(w io.Writer) *bufio.Writer {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

func putWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	writers.Put(bw)
}

// conn is one upstream connection. Only the goroutine running its current
// request reads and writes it; interrupt and close may come from any.
type conn struct {
	nc  net.Conn
	raw syscall.RawConn // for the liveness probe and pushing bodies; nil when nc has none
	key string
	r   countReader
	w   countWriter
	// br buffers the response head, and a body read through Read; nil
	// while the connection is idle or a body is pushed (WriteTo), so that
	// neither holds it. Only the request's goroutine touches it.
	br     *bufio.Reader
	reused bool      // taken from the idle list for this request
	idleAt time.Time // when it was last put idle
	once   sync.Once

	dmu         sync.Mutex
	interrupted bool // guarded by dmu; set once, by interrupt
}

func newConn(nc net.Conn, key string) *conn {
	c := &conn{nc: nc, key: key}
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	c.r = countReader{r: nc, limit: -1}
	c.w = countWriter{w: nc}
	return c
}

// takeReader gives c a read buffer for a response.
func (c *conn) takeReader(t *Transport) {
	if c.br != nil {
		return
	}
	if br, ok := t.readers.Get().(*bufio.Reader); ok {
		br.Reset(&c.r)
		c.br = br
		return
	}
	c.br = bufio.NewReaderSize(&c.r, t.readBuf)
}

// releaseReader returns c's read buffer to t when it holds no bytes.
func (c *conn) releaseReader(t *Transport) {
	if c.br == nil || c.br.Buffered() > 0 {
		return
	}
	c.br.Reset(nil)
	t.readers.Put(c.br)
	c.br = nil
}

// aLongTimeAgo is a deadline in the past: it wakes a blocked Read or Write.
var aLongTimeAgo = time.Unix(1, 0)

// interrupt wakes whatever the connection is blocked in, for good: it is
// closed after, never reused, and armRead no longer moves the deadline.
func (c *conn) interrupt() {
	c.dmu.Lock()
	c.interrupted = true
	_ = c.nc.SetDeadline(aLongTimeAgo)
	c.dmu.Unlock()
}

// armRead sets the read deadline to t, unless the connection was
// interrupted (false), whose deadline must stay in the past.
func (c *conn) armRead(t time.Time) bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.interrupted {
		return false
	}
	return c.nc.SetReadDeadline(t) == nil
}

// disarmRead clears the read deadline armRead set, before the connection
// goes idle.
func (c *conn) disarmRead() {
	c.dmu.Lock()
	if !c.interrupted {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	c.dmu.Unlock()
}

func (c *conn) isInterrupted() bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return c.interrupted
}

func (c *conn) close() { c.once.Do(func() { _ = c.nc.Close() }) }

// alive reports whether an idle connection can take a request: no bytes
// arrived while it was idle and the upstream has not closed it.
func (c *conn) alive() bool {
	if c.br != nil && c.br.Buffered() > 0 {
		return false
	}
	if c.raw == nil {
		return true
	}
	return peekAlive(c.raw)
}

// countReader counts the bytes read since the last request was sent and,
// while a response head is read, bounds them.
type countReader struct {
	r     io.Reader
	n     int64 // bytes read since reset
	limit int64 // bytes still allowed for the head; < 0: no bound
	hit   bool  // the head bound was reached
}

func (r *countReader) Read(p []byte) (int, error) {
	if r.limit == 0 {
		r.hit = true
		return 0, ErrHeaderTooLarge
	}
	if r.limit > 0 && int64(len(p)) > r.limit {
		p = p[:r.limit]
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if r.limit > 0 {
		r.limit -= int64(n)
	}
	return n, err
}

// countWriter counts the bytes written since the last request began, and
// keeps the socket's write error (to tell it from the request body's).
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (w *countWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	if err != nil {
		w.err = err
	}
	return n, err
}

// body is a response body on a pooled connection: read to its end, the
// connection goes back to the idle list; closed early or failed, it is
// closed.
type body struct {
	t    *Transport
	c    *conn
	rc   io.ReadCloser // from http.ReadResponse: framing (length, chunked, close)
	ctx  context.Context
	stop func() bool // stops the cancellation hook; false once it ran
	keep bool        // the connection may be reused after a clean end
	// kind and length are the body's framing, for WriteTo's decoder; kind
	// is 0 for no body.
	kind   framing
	length int64
	// pulled: Read or WriteTo has begun, and the framing's state is in
	// the reader that began; only the reading goroutine touches it.
	pulled bool
	// job is the request's write when it goes on concurrently with the
	// response (see exchange); nil when it ended before.
	job *writeJob
	// pushing: WriteTo is reading the socket inside a raw read, where the
	// descriptor's Close would wait for the caller's writer (see Close).
	pushing atomic.Bool

	// state is bodyOpen, then bodyDone (read to the end or failed; the
	// reader released the connection) or bodyClosed (Close won; it closed
	// the connection, which fails a concurrent Read).
	state atomic.Int32
	err   error // sticky read error; only the reading goroutine touches it
}

const (
	bodyOpen int32 = iota
	bodyDone
	bodyClosed
)

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.state.Load() == bodyClosed {
		return 0, ErrBodyClosed
	}
	b.pulled = true
	n, err := b.rc.Read(p)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF):
		b.err = io.EOF
		b.finish(true)
		return n, io.EOF
	}
	if b.state.Load() == bodyClosed {
		b.err = ErrBodyClosed
	} else if cerr := b.ctx.Err(); cerr != nil {
		b.err = cerr
	} else {
		b.err = fmt.Errorf("h1client: read body: %w", err)
	}
	b.finish(false)
	return n, b.err
}

// finish releases the connection once: back to the idle list after a clean
// end when nothing else wants it closed, else closed.
func (b *body) finish(clean bool) {
	if !b.state.CompareAndSwap(bodyOpen, bodyDone) {
		return
	}
	hookStopped := b.stop()
	if clean && b.keep && hookStopped && (b.c.br == nil || b.c.br.Buffered() == 0) && b.wroteRequest() {
		b.c.releaseReader(b.t)
		b.c.reused = false
		b.t.putIdle(b.c)
		return
	}
	b.c.close()
	if b.job != nil {
		// A write still reading the request body (the upstream answered
		// before it was sent whole) ends here, not when the body's
		// producer does.
		closeRequestBody(b.job.req)
	}
}

// wroteRequest reports whether the request was written whole, waiting up
// to maxWriteWait for a concurrent write: a connection whose request was
// not (the upstream answered before reading it all) is not reused.
func (b *body) wroteRequest() bool {
	if b.job == nil {
		return true
	}
	select {
	case err := <-b.job.done:
		return err == nil
	default:
	}
	t := time.NewTimer(maxWriteWait)
	defer t.Stop()
	select {
	case err := <-b.job.done:
		return err == nil
	case <-t.C:
		return false
	}
}

// Close ends the body. Before its end the connection is closed (the rest
// of the response is not worth reading); a concurrent Read then fails.
// During a push the descriptor's Close would wait for the push's read
// callback, and so for the caller's writer, which may be blocked: Close
// then interrupts the connection and the push closes it as it returns
// (whichever of the two sees the other's flag last closes). A request body
// still being written is closed, as finish closes it.
func (b *body) Close() error {
	if b.state.CompareAndSwap(bodyOpen, bodyClosed) {
		b.stop()
		if b.job != nil {
			closeRequestBody(b.job.req)
		}
		if b.pushing.Load() {
			b.c.interrupt()
			if b.pushing.Load() {
				return nil
			}
		}
		b.c.close()
	}
	return nil
}
