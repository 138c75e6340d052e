//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iop-gateway/iop/bench/mockup"
)

// The step and memory phases open thousands of paced streams at once. With
// one goroutine, bufio reader and chunked decoder per stream (streamOnce),
// every chunk costs a goroutine wake-up and a trip through net/http, and
// the load generator, sharing CPU 1 with the mock, became the limit of the
// direct path. runStreamLoad instead drives every stream of a run from one
// goroutine: raw non-blocking sockets, one pre-encoded request, one epoll
// instance, one shared read buffer, and a per-stream state machine that
// decodes the response framing and counts `data:` lines without allocating.

// loadSpec is one run of runStreamLoad.
type loadSpec struct {
	addr   netip.AddrPort
	req    []byte        // the whole request, sent once per stream
	n      int           // streams
	ramp   time.Duration // stream i starts at ramp*i/n
	chunks int           // gaps are kept among the first chunks data lines
	gaps   bool          // keep the gaps (the memory phase does not)
	// timeout bounds the run; 0: until ctx ends.
	timeout time.Duration
	// open counts streams past their first data line and not ended;
	// failed counts streams that ended with an error before ctx ended.
	// Both optional.
	open, failed *atomic.Int64
}

// streamRequest encodes the request streamOnce sends, for t.
func streamRequest(t target, chunks int, interval time.Duration, pad int) (netip.AddrPort, []byte, error) {
	u, err := url.Parse(t.url)
	if err != nil {
		return netip.AddrPort{}, nil, fmt.Errorf("target url: %w", err)
	}
	ap, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		return netip.AddrPort{}, nil, fmt.Errorf("target url %s: want ip:port: %w", t.url, err)
	}
	n := mockup.DefaultChunks
	if t.runPath {
		n = chunks
	}
	body := pacedBody(t.streamModel, n, chunks, interval, pad)
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s/v1/chat/completions HTTP/1.1\r\nHost: %s\r\nUser-Agent: iopbench\r\nContent-Length: %d\r\n"+
		"Content-Type: application/json\r\nAccept: text/event-stream\r\n\r\n",
		u.EscapedPath(), u.Host, len(body))
	b.Write(body)
	return ap, b.Bytes(), nil
}

// runStreamLoad runs spec's streams and returns what each saw. Streams not
// started or not finished when ctx ends or the timeout passes fail with
// that error.
func runStreamLoad(ctx context.Context, spec loadSpec) ([]streamResult, error) {
	res := make([]streamResult, spec.n)
	l, err := newLoop(spec, res)
	if err != nil {
		return nil, err
	}
	defer l.close()
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { l.interrupt(); close(fired) })
	// The eventfd must outlive a wake-up already under way.
	defer func() {
		if !stop() {
			<-fired
		}
	}()
	err = l.run(ctx)
	return res, err
}

// Where a stream is in its response.
const (
	stIdle       = iota // not started
	stConnecting        // connect in flight, request not sent in full
	stHead              // reading the status line and headers
	stChunkSize         // chunked: the size line
	stChunkExt          // chunked: the rest of the size line
	stChunkData         // chunked: payload
	stChunkCR           // chunked: the CRLF after the payload
	stTrailer           // chunked: trailer lines after the zero chunk
	stLength            // Content-Length body
	stUntilClose        // body delimited by the connection's close
	stEnded
)

// Where the SSE scanner is in the current line.
const (
	lnStart = iota // at a line start, rawStream.matched bytes of "data:" seen
	lnData         // in a data line
	lnOther        // in any other line
)

var dataPrefix = []byte("data:")

const doneToken = "[DONE]"

// rawStream is one stream's state; its result lives in the loop's results.
type rawStream struct {
	fd    int
	state uint8
	sent  int // request bytes written
	start time.Time
	last  time.Time
	head  []byte // response head split over reads, else nil

	chunkLeft   int64 // payload left in the current chunk, or of the Content-Length body
	sizeDigits  int
	trailerLine bool // inside a non-empty trailer line

	line    uint8
	matched int // bytes of "data:" matched at a line start
	// done matching of the current data line: -1 undecided while skipping
	// spaces, 0..len(doneToken) matched so far, -2 not [DONE].
	doneAt int
	first  bool
}

type loop struct {
	spec    loadSpec
	res     []streamResult
	streams []rawStream
	ep      int
	epFile  *os.File        // ep in Go's netpoller, for waiting
	epRaw   syscall.RawConn // of epFile
	wakeFD  int             // eventfd: written when ctx ends
	buf     []byte
	events  []unix.EpollEvent
	active  int // started and not ended
	sa      unix.Sockaddr
	domain  int
}

// wakeTag marks the eventfd among epoll events (streams are tagged with
// their index).
const wakeTag = -1

func newLoop(spec loadSpec, res []streamResult) (*loop, error) {
	l := &loop{spec: spec, res: res, streams: make([]rawStream, spec.n), ep: -1, wakeFD: -1,
		buf: make([]byte, 64<<10), events: make([]unix.EpollEvent, 512)}
	if spec.addr.Addr().Is4() {
		l.sa, l.domain = &unix.SockaddrInet4{Port: int(spec.addr.Port()), Addr: spec.addr.Addr().As4()}, unix.AF_INET
	} else {
		l.sa, l.domain = &unix.SockaddrInet6{Port: int(spec.addr.Port()), Addr: spec.addr.Addr().As16()}, unix.AF_INET6
	}
	var err error
	if l.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	// The loop waits for its epoll instance in Go's netpoller (an epoll
	// descriptor is readable while it has events) instead of blocking in
	// epoll_wait: a goroutine blocked in a system call makes sysmon retake
	// the P and wake up every 20 µs, thousands of times a second on the
	// CPU the mock needs.
	if err := unix.SetNonblock(l.ep, true); err != nil {
		l.close()
		return nil, fmt.Errorf("epoll: %w", err)
	}
	l.epFile = os.NewFile(uintptr(l.ep), "epoll")
	if l.epRaw, err = l.epFile.SyscallConn(); err != nil {
		l.close()
		return nil, fmt.Errorf("epoll: %w", err)
	}
	if l.wakeFD, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		l.close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeTag}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, l.wakeFD, &ev); err != nil {
		l.close()
		return nil, fmt.Errorf("epoll add: %w", err)
	}
	for i := range l.streams {
		l.streams[i].fd = -1
	}
	return l, nil
}

// interrupt wakes the loop from another goroutine (ctx ended).
func (l *loop) interrupt() {
	var one = [8]byte{1}
	_, _ = unix.Write(l.wakeFD, one[:])
}

// close releases every descriptor; streams still open are cut.
func (l *loop) close() {
	for i := range l.streams {
		if fd := l.streams[i].fd; fd >= 0 {
			_ = unix.Close(fd)
			l.streams[i].fd = -1
		}
	}
	switch {
	case l.epFile != nil:
		_ = l.epFile.Close()
	case l.ep >= 0:
		_ = unix.Close(l.ep)
	}
	if l.wakeFD >= 0 {
		_ = unix.Close(l.wakeFD)
	}
}

func (l *loop) run(ctx context.Context) error {
	begin := time.Now()
	var deadline time.Time
	if l.spec.timeout > 0 {
		deadline = begin.Add(l.spec.timeout)
	}
	started, full := 0, false
	for {
		now := time.Now()
		if err := ctx.Err(); err != nil {
			l.abort(err)
			return nil
		}
		if !deadline.IsZero() && !now.Before(deadline) {
			l.abort(context.DeadlineExceeded)
			return nil
		}
		for started < l.spec.n && !now.Before(l.startAt(begin, started)) {
			l.open(started, time.Now())
			started++
		}
		if started == l.spec.n && l.active == 0 {
			return nil
		}
		// Wait until the next start, the deadline, or at most 100 ms (a
		// bound, not a poll: the eventfd wakes the loop when ctx ends),
		// unless the last batch filled the event buffer: more are ready.
		until := now.Add(100 * time.Millisecond)
		if started < l.spec.n {
			until = earliest(until, l.startAt(begin, started))
		}
		if !deadline.IsZero() {
			until = earliest(until, deadline)
		}
		n, err := l.wait(full, until)
		if err != nil {
			l.abort(err)
			return err
		}
		full = n == len(l.events)
		for _, ev := range l.events[:n] {
			if ev.Fd == wakeTag {
				continue // ctx ended: seen at the top of the loop
			}
			l.handle(int(ev.Fd), ev.Events)
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// wait returns the next batch of events: at once when ready (or when
// more is set: the last batch filled the buffer), else when one arrives or
// at until (then none).
func (l *loop) wait(more bool, until time.Time) (int, error) {
	if more {
		n, errno := l.epollNow()
		if errno != 0 && errno != unix.EINTR {
			return 0, fmt.Errorf("epoll wait: %w", errno)
		}
		return n, nil
	}
	if err := l.epFile.SetReadDeadline(until); err != nil {
		return 0, fmt.Errorf("epoll deadline: %w", err)
	}
	var n int
	var errno unix.Errno
	err := l.epRaw.Read(func(uintptr) bool {
		n, errno = l.epollNow()
		// Not done (park until the netpoller reports the epoll
		// descriptor readable) only when nothing is ready.
		return n > 0 || (errno != 0 && errno != unix.EINTR)
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("epoll wait: %w", err)
	case errno != 0:
		return 0, fmt.Errorf("epoll wait: %w", errno)
	}
	return n, nil
}

// epollNow collects the ready events without blocking. Like the socket
// reads it is a raw system call: it never blocks, so the scheduler need
// not know about it (see newLoop).
func (l *loop) epollNow() (int, unix.Errno) {
	r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.ep), uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

// readNow reads from a non-blocking socket with a raw system call.
func readNow(fd int, b []byte) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

func (l *loop) startAt(begin time.Time, i int) time.Time {
	return begin.Add(l.spec.ramp * time.Duration(i) / time.Duration(l.spec.n))
}

// open starts stream i: a non-blocking connect, then the request once the
// socket is writable. Its start time (TTFT's origin) is taken before the
// connect, as streamOnce's is before the dial.
func (l *loop) open(i int, now time.Time) {
	s := &l.streams[i]
	s.start, s.state, s.doneAt = now, stConnecting, -1
	if l.spec.gaps {
		l.res[i].gaps = make([]time.Duration, 0, max(l.spec.chunks-1, 0))
	}
	l.active++
	fd, err := unix.Socket(l.domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		l.end(i, fmt.Errorf("socket: %w", err), true)
		return
	}
	s.fd = fd
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	// Edge-triggered: a read that returns less than the buffer has drained
	// the socket, so one read per arrival suffices.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(i)}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.end(i, fmt.Errorf("epoll add: %w", err), true)
		return
	}
	switch err := unix.Connect(fd, l.sa); {
	case err == nil:
		l.send(i)
	case errors.Is(err, unix.EINPROGRESS):
		// EPOLLOUT follows when the connection is up (or has failed).
	default:
		l.end(i, fmt.Errorf("connect: %w", err), true)
	}
}

func (l *loop) handle(i int, events uint32) {
	if i < 0 || i >= len(l.streams) {
		return
	}
	s := &l.streams[i]
	if s.state == stConnecting {
		if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		l.send(i)
		if s.state == stConnecting || s.state == stEnded {
			return
		}
	}
	if s.state != stEnded && events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		l.read(i)
	}
}

// send checks the connect's outcome and writes (the rest of) the request.
func (l *loop) send(i int) {
	s := &l.streams[i]
	if s.sent == 0 {
		errno, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && errno != 0 {
			err = unix.Errno(errno)
		}
		if err != nil {
			l.end(i, fmt.Errorf("connect: %w", err), true)
			return
		}
	}
	for s.sent < len(l.spec.req) {
		n, err := unix.Write(s.fd, l.spec.req[s.sent:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return // not connected yet, or the socket is full: EPOLLOUT follows
		case err != nil:
			l.end(i, fmt.Errorf("write request: %w", err), true)
			return
		}
		s.sent += n
	}
	s.state = stHead
}

// read drains stream i's socket into the shared buffer and decodes it.
func (l *loop) read(i int) {
	s := &l.streams[i]
	for s.state != stEnded {
		n, errno := readNow(s.fd, l.buf)
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return
		case errno != 0:
			l.end(i, fmt.Errorf("read: %w", errno), true)
			return
		case n == 0:
			l.eof(i, time.Now())
			return
		}
		if err := l.feed(i, l.buf[:n], time.Now()); err != nil {
			l.end(i, err, true)
			return
		}
		if n < len(l.buf) {
			return
		}
	}
}

// eof handles the server's close: the end of a body delimited by it, else
// a cut response.
func (l *loop) eof(i int, now time.Time) {
	switch l.streams[i].state {
	case stUntilClose:
		l.complete(i, now)
	case stHead:
		l.end(i, fmt.Errorf("response head: %w", io.ErrUnexpectedEOF), true)
	default:
		l.end(i, fmt.Errorf("response body: %w", io.ErrUnexpectedEOF), true)
	}
}

// complete ends a response read in full: an unterminated last data line
// counts, as streamOnce counts it at EOF.
func (l *loop) complete(i int, now time.Time) {
	if l.streams[i].line == lnData {
		l.dataLine(i, now)
	}
	var err error
	if !l.res[i].done {
		err = errors.New("stream ended without [DONE]")
	}
	l.end(i, err, true)
}

// end closes stream i and records err (nil: success). counted tells
// whether a failure goes into spec.failed (not when the run itself ends).
func (l *loop) end(i int, err error, counted bool) {
	s := &l.streams[i]
	if s.state == stEnded {
		return
	}
	if s.state != stIdle {
		l.active--
	}
	if s.fd >= 0 {
		_ = unix.Close(s.fd) // also leaves the epoll set
		s.fd = -1
	}
	s.state, s.head = stEnded, nil
	l.res[i].err = err
	if s.first && l.spec.open != nil {
		l.spec.open.Add(-1)
	}
	if err != nil && counted && l.spec.failed != nil {
		l.spec.failed.Add(1)
	}
}

// abort ends every stream still open, and every stream not started, with
// err.
func (l *loop) abort(err error) {
	for i := range l.streams {
		l.end(i, err, false)
	}
}

// feed decodes b, the next bytes of stream i's response, received at now.
func (l *loop) feed(i int, b []byte, now time.Time) error {
	s := &l.streams[i]
	for len(b) > 0 {
		switch s.state {
		case stHead:
			n, err := l.head(i, b)
			if err != nil {
				return err
			}
			b = b[n:]
			if s.state == stLength && s.chunkLeft == 0 {
				l.complete(i, now)
				return nil
			}
		case stChunkSize:
			c := b[0]
			b = b[1:]
			switch v := unhex(c); {
			case v >= 0:
				if s.sizeDigits++; s.sizeDigits > 15 {
					return errors.New("chunk size: too long")
				}
				s.chunkLeft = s.chunkLeft<<4 | int64(v)
			case c == '\r':
			case c == ';' || c == ' ' || c == '\t':
				s.state = stChunkExt
			case c == '\n':
				if err := l.sizeDone(i); err != nil {
					return err
				}
			default:
				return fmt.Errorf("chunk size: unexpected %q", c)
			}
		case stChunkExt:
			j := bytes.IndexByte(b, '\n')
			if j < 0 {
				return nil
			}
			b = b[j+1:]
			if err := l.sizeDone(i); err != nil {
				return err
			}
		case stChunkData:
			k := min(int64(len(b)), s.chunkLeft)
			l.scan(i, b[:k], now)
			s.chunkLeft -= k
			b = b[k:]
			if s.chunkLeft == 0 {
				s.state = stChunkCR
			}
		case stChunkCR:
			switch b[0] {
			case '\r':
			case '\n':
				s.state, s.sizeDigits, s.chunkLeft = stChunkSize, 0, 0
			default:
				return fmt.Errorf("chunk: want CRLF after the payload, got %q", b[0])
			}
			b = b[1:]
		case stTrailer:
			if s.trailerLine {
				j := bytes.IndexByte(b, '\n')
				if j < 0 {
					return nil
				}
				b, s.trailerLine = b[j+1:], false
				continue
			}
			c := b[0]
			b = b[1:]
			switch c {
			case '\r':
			case '\n':
				l.complete(i, now) // the empty line after the zero chunk
				return nil
			default:
				s.trailerLine = true
			}
		case stLength:
			k := min(int64(len(b)), s.chunkLeft)
			l.scan(i, b[:k], now)
			s.chunkLeft -= k
			b = b[k:]
			if s.chunkLeft == 0 {
				l.complete(i, now)
				return nil
			}
		case stUntilClose:
			l.scan(i, b, now)
			return nil
		default:
			return nil // ended: nothing more is read
		}
	}
	return nil
}

func (l *loop) sizeDone(i int) error {
	s := &l.streams[i]
	if s.sizeDigits == 0 {
		return errors.New("chunk size: missing")
	}
	if s.chunkLeft == 0 {
		s.state, s.trailerLine = stTrailer, false
	} else {
		s.state = stChunkData
	}
	return nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// maxHead bounds a response head kept across reads.
const maxHead = 16 << 10

var crlf2 = []byte("\r\n\r\n")

// head consumes the response head from b (across reads when split) and
// returns how many bytes of b it took.
func (l *loop) head(i int, b []byte) (int, error) {
	s := &l.streams[i]
	var blk []byte
	n := 0
	if s.head == nil {
		j := bytes.Index(b, crlf2)
		if j < 0 {
			if len(b) > maxHead {
				return 0, errors.New("response head: too large")
			}
			s.head = append(make([]byte, 0, 2*len(b)), b...)
			return len(b), nil
		}
		blk, n = b[:j+4], j+4
	} else {
		old := len(s.head)
		s.head = append(s.head, b...)
		j := bytes.Index(s.head[max(0, old-3):], crlf2)
		if j < 0 {
			if len(s.head) > maxHead {
				return 0, errors.New("response head: too large")
			}
			return len(b), nil
		}
		j += max(0, old-3)
		blk, n = s.head[:j+4], j+4-old
	}
	code, chunked, length, err := parseHead(blk)
	s.head = nil
	switch {
	case err != nil:
		return 0, err
	case code >= 100 && code < 200 && code != 101:
		return n, nil // an interim answer: the real head follows
	case code != 200:
		return 0, fmt.Errorf("status %d", code)
	case chunked:
		s.state, s.sizeDigits, s.chunkLeft = stChunkSize, 0, 0
	case length >= 0:
		s.state, s.chunkLeft = stLength, length
	default:
		s.state = stUntilClose
	}
	s.line, s.matched = lnStart, 0
	return n, nil
}

// parseHead reads the status code and the body's framing from a response
// head ending in CRLF CRLF. length is -1 without Content-Length.
func parseHead(blk []byte) (code int, chunked bool, length int64, err error) {
	line, rest, _ := bytes.Cut(blk, []byte("\r\n"))
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, 0, fmt.Errorf("status line %q", line)
	}
	if code, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, false, 0, fmt.Errorf("status line %q", line)
	}
	length = -1
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = chunked || bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return 0, false, 0, fmt.Errorf("content-length %q", value)
			}
		}
	}
	if chunked {
		length = -1
	}
	return code, chunked, length, nil
}

// scan counts the `data:` lines in b, decoded body bytes of stream i.
// Framing lines never reach it, so a data line is one that starts the
// body or follows a newline; the prefix and the line may be split over
// reads.
func (l *loop) scan(i int, b []byte, now time.Time) {
	s := &l.streams[i]
	for len(b) > 0 {
		switch s.line {
		case lnStart:
			for s.matched < len(dataPrefix) && len(b) > 0 && b[0] == dataPrefix[s.matched] {
				s.matched++
				b = b[1:]
			}
			switch {
			case s.matched == len(dataPrefix):
				s.line, s.doneAt = lnData, -1
			case len(b) > 0:
				s.line = lnOther // a mismatch (not consumed: it may be the newline)
			}
		case lnOther:
			j := bytes.IndexByte(b, '\n')
			if j < 0 {
				return
			}
			b, s.line, s.matched = b[j+1:], lnStart, 0
		case lnData:
			// Is the payload [DONE] (after optional spaces, as streamOnce
			// trims them)? Decided once, at its first bytes.
			for s.doneAt > -2 && s.doneAt < len(doneToken) && len(b) > 0 && b[0] != '\n' {
				c := b[0]
				if s.doneAt == -1 && (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
					b = b[1:]
					continue
				}
				s.doneAt = max(s.doneAt, 0)
				if c != doneToken[s.doneAt] {
					s.doneAt = -2
					break
				}
				s.doneAt++
				b = b[1:]
			}
			j := bytes.IndexByte(b, '\n')
			if j < 0 {
				return
			}
			b = b[j+1:]
			l.dataLine(i, now)
			s.line, s.matched = lnStart, 0
		}
	}
}

// dataLine records a complete data line of stream i at now.
func (l *loop) dataLine(i int, now time.Time) {
	s, r := &l.streams[i], &l.res[i]
	r.lines++
	switch {
	case r.lines == 1:
		r.ttft = now.Sub(s.start)
		s.first = true
		if l.spec.open != nil {
			l.spec.open.Add(1)
		}
	case r.lines <= l.spec.chunks && l.spec.gaps:
		r.gaps = append(r.gaps, now.Sub(s.last))
	}
	s.last = now
	if s.doneAt == len(doneToken) {
		r.done = true
	}
}
