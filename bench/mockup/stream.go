package mockup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Streams on HTTP/1.1 connections are served without a goroutine, timer
// and flush per stream: the handler hijacks the connection, writes the
// response head and the first chunk itself, and hands the stream to the
// process's pacer, one goroutine that keeps every stream in a heap ordered
// by the due time of its next chunk and writes due chunks straight to the
// socket (non-blocking, one write per stream per pass). At thousands of
// concurrent streams this is what keeps the mock cheap enough that the
// benchmark measures the gateway, not its own upstream.
//
// The hijacked connection stays keep-alive: one goroutine per connection
// (serveConn) reads the next request, which also notices at once when the
// client goes away mid-stream, and answers it with the same Handler.

const (
	// idleTimeout and headerTimeout match Server's for hijacked connections.
	idleTimeout   = 120 * time.Second
	headerTimeout = 10 * time.Second
	// writeTimeout bounds a buffered (non-streamed) answer's write.
	writeTimeout = 10 * time.Second
	// maxDrain is how much of an unread request body is discarded to keep
	// the connection; past it the connection is closed.
	maxDrain = 256 << 10
	// scratchSize bounds one write of the pacer, and so what a stream can
	// hold unsent when its reader stalls.
	scratchSize = 64 << 10
	// yieldEvery is how many streams the pacer serves before yielding
	// (about a millisecond of writes).
	yieldEvery = 128
)

// frame encodes payload as one HTTP/1.1 chunk.
func frame(payload []byte) []byte {
	b := strconv.AppendInt(nil, int64(len(payload)), 16)
	b = append(b, "\r\n"...)
	b = append(b, payload...)
	return append(b, "\r\n"...)
}

// Chunked frames shared by every stream; the tail (the last chunk, the
// usage chunk, [DONE] and the terminating zero chunk) depends on the
// stream.
var (
	frameFirst = [2][]byte{frame(firstChunk[0]), frame(firstChunk[1])}
	frameMid   = [2][]byte{frame(midChunk[0]), frame(midChunk[1])}
)

func streamTail(chunks int, usage bool) []byte {
	last := lastChunk[b2i(usage)]
	p := make([]byte, 0, 2*len(last)+len(doneEvent))
	p = append(p, last...)
	if usage {
		p = append(p, usageChunk(chunks)...)
	}
	p = append(p, doneEvent...)
	return append(frame(p), "0\r\n\r\n"...)
}

// date is the Date header value, formatted at most once per second.
type dateCache struct {
	sec int64
	s   string
}

var lastDate atomic.Pointer[dateCache]

func httpDate(now time.Time) string {
	if d := lastDate.Load(); d != nil && d.sec == now.Unix() {
		return d.s
	}
	d := &dateCache{sec: now.Unix(), s: now.UTC().Format(http.TimeFormat)}
	lastDate.Store(d)
	return d.s
}

func streamHead(now time.Time, closeAfter bool) []byte {
	b := make([]byte, 0, 192)
	b = append(b, "HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\n"...)
	if closeAfter {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "Content-Type: text/event-stream; charset=utf-8\r\nDate: "...)
	b = append(b, httpDate(now)...)
	return append(b, "\r\nTransfer-Encoding: chunked\r\n\r\n"...)
}

// stream is one paced stream on a hijacked connection.
type stream struct {
	conn     net.Conn
	fd       int // conn's socket; written only by the pacer once registered
	start    time.Time
	interval time.Duration
	chunks   int
	usage    bool // include_usage: chunks carry "usage":null
	tail     []byte
	next     int       // index of the next chunk to send; chunks: all sent
	pend     []byte    // accepted for sending but not taken by the socket yet
	stalled  time.Time // since when the socket has taken nothing; zero: it has
	due      int64     // pacer clock (ns) at which the stream needs a write
	idx      int       // heap index, -1 when not in the heap
	ended    bool      // owned by whoever finishes the stream (pacer or starter)
	err      error     // set before done closes
	done     chan struct{}
}

func (s *stream) frame(i int) []byte {
	switch {
	case i == s.chunks-1:
		return s.tail
	case i == 0:
		return frameFirst[b2i(s.usage)]
	}
	return frameMid[b2i(s.usage)]
}

// dueBy is how many chunks are due at t (an absolute schedule: chunk i at
// start + i*interval, so a late pass does not shift later chunks).
func (s *stream) dueBy(t time.Time) int {
	if s.interval <= 0 {
		return s.chunks
	}
	d := t.Sub(s.start)
	if d < 0 {
		return 0
	}
	return int(min(int64(s.chunks), int64(d/s.interval)+1))
}

// fill appends to buf (up to its capacity) the pending bytes and the chunks
// due by t.
func (s *stream) fill(buf []byte, t time.Time) []byte {
	buf = append(buf, s.pend...)
	for due := s.dueBy(t); s.next < due; s.next++ {
		f := s.frame(s.next)
		if len(buf)+len(f) > cap(buf) && len(buf) > 0 {
			break
		}
		buf = append(buf, f...)
	}
	return buf
}

// retryAfter is how long a stream whose socket is full waits before the
// next attempt: about its own pacing, so a stalled reader costs no more
// writes than a healthy one.
func (s *stream) retryAfter() time.Duration {
	return min(max(s.interval, time.Millisecond), 50*time.Millisecond)
}

// stallTimeout ends a stream whose reader has taken nothing for this long,
// so that neither the stream nor its connection is held forever (a
// variable for tests).
var stallTimeout = 2 * time.Minute

// streamsInFlight counts streams not finished yet (tests read it).
var streamsInFlight atomic.Int64

// errCanceled ends a stream whose client went away.
var errCanceled = errors.New("client gone")

// startStream writes the response head and the first chunk on conn (no
// deadline may be armed on conn) and hands the rest to the pacer. The
// returned stream's done closes when it has ended. It returns nil when
// conn's socket cannot be written without blocking (no file descriptor):
// the caller then serves the stream itself.
func startStream(conn net.Conn, chunks int, interval time.Duration, usage, closeAfter bool) *stream {
	fd, ok := rawFD(conn)
	if !ok {
		return nil
	}
	now := time.Now()
	s := &stream{conn: conn, fd: fd, start: now, interval: interval, chunks: chunks, usage: usage, tail: streamTail(chunks, usage), idx: -1, done: make(chan struct{})}
	streamsInFlight.Add(1)
	// The first write is small (head and first chunk); an unpaced stream's
	// further chunks go out in the pacer's larger writes.
	buf := make([]byte, 0, 2048)
	buf = append(buf, streamHead(now, closeAfter)...)
	buf = s.fill(buf, now)
	n, err := writeFD(fd, buf)
	if err != nil {
		s.finish(fmt.Errorf("write: %w", err))
		return s
	}
	if n < len(buf) {
		s.pend = append([]byte(nil), buf[n:]...)
	}
	if s.next == s.chunks && len(s.pend) == 0 {
		s.finish(nil)
		return s
	}
	pace.add(s)
	return s
}

// finish ends s: it arms conn's read deadline for serveConn (the idle
// timeout after a complete stream, now after a failed one so that the
// connection is closed) and closes done.
func (s *stream) finish(err error) {
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	streamsInFlight.Add(-1)
	if err != nil {
		_ = s.conn.SetReadDeadline(time.Now())
	} else {
		_ = s.conn.SetReadDeadline(time.Now().Add(idleTimeout))
	}
	close(s.done)
}

// pacer writes the due chunks of every registered stream.
type pacer struct {
	mu      sync.Mutex
	inbox   []*stream
	cancels []*stream
	running bool
	wake    chan struct{} // capacity 1: a pending wake-up is enough

	// Owned by the pacer goroutine.
	heap    []slot
	scratch []byte
	epoch   time.Time
}

var pace = &pacer{wake: make(chan struct{}, 1), epoch: time.Now()}

func (p *pacer) clock(t time.Time) int64 { return int64(t.Sub(p.epoch)) }

// add registers s; the pacer goroutine runs while any stream is registered.
func (p *pacer) add(s *stream) {
	p.post(func() { p.inbox = append(p.inbox, s) })
}

// cancel ends s early (its client went away).
func (p *pacer) cancel(s *stream) {
	p.post(func() { p.cancels = append(p.cancels, s) })
}

func (p *pacer) post(f func()) {
	p.mu.Lock()
	f()
	if !p.running {
		p.running = true
		p.mu.Unlock()
		// Owner: the pacer; stops when no stream is registered (add starts
		// it again).
		go p.run()
		return
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pacer) run() {
	if p.scratch == nil {
		p.scratch = make([]byte, 0, scratchSize)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var inbox, cancels []*stream
	for {
		p.mu.Lock()
		inbox, p.inbox = p.inbox, inbox[:0]
		cancels, p.cancels = p.cancels, cancels[:0]
		if len(inbox) == 0 && len(cancels) == 0 && len(p.heap) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		for i, s := range inbox {
			s.due = p.clock(s.start.Add(time.Duration(s.next) * s.interval))
			if len(s.pend) > 0 {
				s.due = p.clock(time.Now().Add(s.retryAfter()))
			}
			p.push(s)
			inbox[i] = nil
		}
		for i, s := range cancels {
			if !s.ended {
				p.remove(s)
				s.finish(errCanceled)
			}
			cancels[i] = nil
		}
		// Serve the most overdue streams, a batch at a time. Between
		// batches the pacer lets the rest of the process (net/http
		// starting new streams) and of the CPU (the client reading them,
		// when it shares the CPU) run, and takes in new streams: when it
		// is behind, the due streams form one long queue, and whoever waits
		// behind it (a new stream's second chunk, the reader's timestamps)
		// would otherwise wait for all of it.
		now := time.Now()
		served := 0
		for served < yieldEvery && len(p.heap) > 0 && p.heap[0].due <= p.clock(now) {
			p.serve(p.heap[0].s, now)
			served++
		}
		if served == yieldEvery {
			runtime.Gosched()
			yieldCPU()
			continue
		}
		if len(p.heap) == 0 {
			continue
		}
		// Sleep until the next stream is due or a stream is added or
		// cancelled. Go's timers wake with about a millisecond of slack
		// on an idle process, so passes naturally batch the streams due
		// within it.
		if wait := time.Duration(p.heap[0].due - p.clock(time.Now())); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-p.wake:
				timer.Stop()
			}
		}
	}
}

// serve writes what s has due by now and reschedules or finishes it.
func (p *pacer) serve(s *stream, now time.Time) {
	buf := s.fill(p.scratch[:0], now)
	n, err := writeFD(s.fd, buf)
	if err != nil {
		p.remove(s)
		s.finish(fmt.Errorf("write: %w", err))
		return
	}
	s.pend = append(s.pend[:0], buf[n:]...)
	if s.next == s.chunks && len(s.pend) == 0 {
		p.remove(s)
		s.finish(nil)
		return
	}
	switch {
	case n > 0 || len(s.pend) == 0:
		s.stalled = time.Time{}
	case s.stalled.IsZero():
		s.stalled = now
	case now.Sub(s.stalled) > stallTimeout:
		p.remove(s)
		s.finish(fmt.Errorf("write: reader took nothing for %s", stallTimeout))
		return
	}
	due := now
	if s.next < s.chunks {
		due = s.start.Add(time.Duration(s.next) * s.interval)
	}
	if len(s.pend) > 0 {
		due = later(due, now.Add(s.retryAfter()))
	}
	s.due = p.clock(due)
	p.reschedule(s)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// A binary min-heap on due. The keys sit in the heap array itself, so a
// sift compares without loading every stream it passes (at thousands of
// streams those loads were most of the pacer's own time); each stream
// knows its index so that a cancel removes it in O(log n).
type slot struct {
	due int64
	s   *stream
}

func (p *pacer) push(s *stream) {
	s.idx = len(p.heap)
	p.heap = append(p.heap, slot{s.due, s})
	p.up(s.idx)
}

func (p *pacer) remove(s *stream) {
	i := s.idx
	if i < 0 {
		return
	}
	last := len(p.heap) - 1
	if i != last {
		p.heap[i] = p.heap[last]
		p.heap[i].s.idx = i
	}
	p.heap[last] = slot{}
	p.heap = p.heap[:last]
	s.idx = -1
	if i != last {
		p.fix(i)
	}
}

// reschedule moves s (in the heap) to its new due time.
func (p *pacer) reschedule(s *stream) {
	p.heap[s.idx].due = s.due
	p.fix(s.idx)
}

func (p *pacer) fix(i int) {
	if !p.down(i) {
		p.up(i)
	}
}

func (p *pacer) up(i int) {
	h := p.heap
	x := h[i]
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].due <= x.due {
			break
		}
		h[i] = h[parent]
		h[i].s.idx = i
		i = parent
	}
	h[i] = x
	x.s.idx = i
}

func (p *pacer) down(i int) bool {
	h, start := p.heap, i
	x := h[i]
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		j := l
		if r := l + 1; r < len(h) && h[r].due < h[l].due {
			j = r
		}
		if x.due <= h[j].due {
			break
		}
		h[i] = h[j]
		h[i].s.idx = i
		i = j
	}
	h[i] = x
	x.s.idx = i
	return i > start
}

// hijackStream takes the connection over from net/http, starts the stream
// on it and serves the connection from then on. It returns false when the
// connection cannot be taken over (nothing has been written then).
func hijackStream(hj http.Hijacker, r *http.Request, h http.Handler, chunks int, interval time.Duration, usage bool) bool {
	conn, rw, err := hj.Hijack()
	if err != nil {
		return false
	}
	// net/http may have left its header or body deadlines armed.
	_ = conn.SetDeadline(time.Time{})
	s := startStream(conn, chunks, interval, usage, r.Close)
	if s == nil {
		s = blockingStream(conn, chunks, interval, usage, r.Close)
	}
	// Owner: the hijacked connection; stops when the client closes it, on
	// the idle timeout, or after a failed stream.
	go serveConn(conn, rw.Reader, h, s, r.Close)
	return true
}

// blockingStream serves a stream with ordinary blocking writes, for a
// connection without a file descriptor (a wrapped net.Conn). It returns the
// ended stream.
func blockingStream(conn net.Conn, chunks int, interval time.Duration, usage, closeAfter bool) *stream {
	s := &stream{conn: conn, start: time.Now(), interval: interval, chunks: chunks, usage: usage, tail: streamTail(chunks, usage), idx: -1, done: make(chan struct{})}
	streamsInFlight.Add(1)
	buf := append(make([]byte, 0, 4096), streamHead(s.start, closeAfter)...)
	for s.next < s.chunks {
		if wait := time.Until(s.start.Add(time.Duration(s.next) * s.interval)); wait > 0 {
			time.Sleep(wait)
		}
		buf = s.fill(buf, time.Now())
		_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := conn.Write(buf); err != nil {
			s.finish(fmt.Errorf("write: %w", err))
			return s
		}
		buf = buf[:0]
	}
	s.finish(nil)
	return s
}

// serveConn serves a hijacked connection: first it waits for the stream s
// (when not nil) while watching for the client to leave, then it reads
// and answers requests until the client closes the connection.
func serveConn(conn net.Conn, br *bufio.Reader, h http.Handler, s *stream, closeAfter bool) {
	defer conn.Close()
	for {
		// While a stream is in flight no deadline is armed: the pacer
		// arms one when the stream ends (finish).
		_, err := br.Peek(1)
		if s != nil {
			select {
			case <-s.done:
			default:
				if err != nil {
					// The client closed or reset the connection mid-stream:
					// stop writing to it. The pacer acknowledges at its next
					// pass.
					pace.cancel(s)
				}
				// Otherwise the client sent its next request before the
				// end of the stream: it is answered after the stream.
				<-s.done
			}
			if s.err != nil || closeAfter {
				return
			}
			s = nil
		}
		if err != nil {
			return // client gone, or idle past idleTimeout
		}
		_ = conn.SetReadDeadline(time.Now().Add(headerTimeout))
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = writeSimple(conn, http.StatusBadRequest, "400 Bad Request")
			}
			return
		}
		if req.ProtoMajor != 1 || req.ProtoMinor != 1 {
			// Chunked streams and keep-alive need HTTP/1.1; no client of
			// the mock switches versions on one connection.
			_ = writeSimple(conn, http.StatusHTTPVersionNotSupported, "505 HTTP Version Not Supported")
			return
		}
		if req.Header.Get("Expect") == "100-continue" && req.ContentLength != 0 {
			_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return
			}
		}
		w := &connWriter{conn: conn, req: req, header: http.Header{}}
		h.ServeHTTP(w, req)
		// What the handler left of the body must go before the next request.
		if n, _ := io.CopyN(io.Discard, req.Body, maxDrain+1); n > maxDrain {
			closeAfter = true
		}
		_ = req.Body.Close()
		closeAfter = closeAfter || req.Close
		if w.stream != nil {
			s = w.stream
			continue
		}
		if err := w.flush(closeAfter); err != nil || closeAfter {
			return
		}
		_ = conn.SetReadDeadline(time.Now().Add(idleTimeout))
	}
}

// writeSimple writes a plain-text error answer.
func writeSimple(conn net.Conn, code int, msg string) error {
	_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Length: %d\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s",
		code, http.StatusText(code), len(msg), msg)
	return err
}

// connWriter is the ResponseWriter for requests on a hijacked connection:
// it buffers an ordinary answer (all of the mock's are small) and writes it
// with a Content-Length; a stream starts through startStream instead.
type connWriter struct {
	conn   net.Conn
	req    *http.Request
	header http.Header
	code   int
	body   bytes.Buffer
	stream *stream
}

func (w *connWriter) Header() http.Header { return w.header }

func (w *connWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *connWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// startStream starts a paced stream as the answer (chat calls it).
func (w *connWriter) startStream(chunks int, interval time.Duration, usage bool) {
	closeAfter := w.req.Close
	_ = w.conn.SetDeadline(time.Time{})
	if w.stream = startStream(w.conn, chunks, interval, usage, closeAfter); w.stream == nil {
		w.stream = blockingStream(w.conn, chunks, interval, usage, closeAfter)
	}
}

func (w *connWriter) flush(closeAfter bool) error {
	w.WriteHeader(http.StatusOK)
	h := w.header
	if h.Get("Date") == "" {
		h.Set("Date", httpDate(time.Now()))
	}
	h.Set("Content-Length", strconv.Itoa(w.body.Len()))
	if h.Get("Content-Type") == "" && w.body.Len() > 0 {
		h.Set("Content-Type", http.DetectContentType(w.body.Bytes()))
	}
	if closeAfter {
		h.Set("Connection", "close")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", w.code, http.StatusText(w.code))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	if w.req.Method != http.MethodHead {
		b.Write(w.body.Bytes())
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := w.conn.Write(b.Bytes())
	return err
}
