package openaicompat

import (
	"bytes"
	"errors"
	"io"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// maxSSEEvent bounds how much of one unfinished event the splitter holds.
// Past it the bytes go out anyway: a relay must not buffer without limit
// because an upstream never ends an event.
const maxSSEEvent = 1 << 20

// sseSplitter cuts a byte stream into runs of whole server-sent events. It
// only ever splits right after a blank line (the end of an event), and it
// releases every complete event as soon as its terminating blank line has
// arrived, so a relay never holds an event back waiting for more data.
//
// Line terminators follow the SSE grammar: CRLF, LF or a lone CR. A CR that
// is the last byte seen so far is undecided (it may be the first half of a
// CRLF), so a split there waits for the next byte or for the end of the
// stream; streams terminated by LF or CRLF are never delayed.
type sseSplitter struct {
	buf       []byte // pending bytes; buf[:scan] are scanned (during push it may alias the caller's bytes)
	scan      int
	end       int  // just past the last complete event in buf[:scan]
	lineStart bool // scan is at the start of a line
	skipLF    bool // the previous byte was a CR taken as a terminator
	limit     int
}

func newSSESplitter(limit int) *sseSplitter {
	return &sseSplitter{lineStart: true, limit: limit}
}

// push appends p and returns the complete events now available (possibly
// several, possibly none). The returned slice is valid until the next call
// and while p is: it may be p's own prefix. p is not kept. When an
// unfinished event reaches the limit, everything pending is returned as is.
func (s *sseSplitter) push(p []byte) []byte {
	s.compact()
	if len(s.buf) == 0 {
		return s.pushInPlace(p)
	}
	s.buf = append(s.buf, p...)
	s.advance()
	n := s.end
	if n == 0 && len(s.buf) >= s.limit {
		s.settleCR()
		n = len(s.buf)
	}
	return s.take(n)
}

// pushInPlace is push with nothing pending, the usual case (an upstream
// writes whole events): p is scanned where it lies and its complete events
// are returned as p's prefix, so only an unfinished tail is copied, and a
// stream whose events arrive whole never allocates a buffer.
func (s *sseSplitter) pushInPlace(p []byte) []byte {
	own := s.buf // empty; its storage is kept for a tail
	s.buf, s.scan = p, 0
	s.advance()
	n := s.end
	if n == 0 && len(p) >= s.limit {
		s.settleCR()
		n = len(p)
	}
	s.buf = append(own, p[n:]...)
	s.scan -= n
	s.end = 0
	if n == 0 {
		return nil
	}
	return p[:n]
}

// flush returns whatever is pending, complete or not: the stream ended.
func (s *sseSplitter) flush() []byte {
	s.compact()
	s.settleCR()
	return s.take(len(s.buf))
}

// pending reports how many bytes are held back.
func (s *sseSplitter) pending() int { return len(s.buf) - s.end }

// take hands out buf[:n]; compact drops them on the next call.
func (s *sseSplitter) take(n int) []byte {
	if n == 0 {
		return nil
	}
	s.end = n
	return s.buf[:n]
}

func (s *sseSplitter) compact() {
	if s.end == 0 {
		return
	}
	rest := copy(s.buf, s.buf[s.end:])
	s.buf = s.buf[:rest]
	s.scan = max(s.scan-s.end, 0)
	s.end = 0
}

// advance scans new bytes for line terminators and records the end of the
// last complete event.
func (s *sseSplitter) advance() {
	b := s.buf
	i := s.scan
	for i < len(b) {
		if s.skipLF {
			s.skipLF = false
			if b[i] == '\n' {
				i++
				continue
			}
		}
		switch b[i] {
		case '\n':
			i++
		case '\r':
			if i+1 == len(b) {
				s.scan = i // undecided: lone CR or the start of CRLF
				return
			}
			i++
			if b[i] == '\n' {
				i++
			}
		default:
			s.lineStart = false
			j := indexLineEnd(b[i:])
			if j < 0 {
				i = len(b)
			} else {
				i += j
			}
			continue
		}
		s.terminator(i)
	}
	s.scan = i
}

// indexLineEnd returns the index of the first CR or LF in b, or -1: what
// bytes.IndexAny(b, "\r\n") returns, by two vectorised byte searches
// instead of its byte-by-byte loop over a set (a SIMD search costs a
// fraction of a loop's per-byte compare past a few bytes). The CR search
// stops at the first LF, so each byte is looked at most twice.
func indexLineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	head := b
	if lf >= 0 {
		head = b[:lf]
	}
	if cr := bytes.IndexByte(head, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// terminator records a line end just before index i.
func (s *sseSplitter) terminator(i int) {
	if s.lineStart {
		s.end = i // a blank line: the event is complete
	}
	s.lineStart = true
}

// settleCR decides an undecided trailing CR as a lone terminator before the
// pending bytes are handed out unconditionally; a following LF is then the
// second half of that CRLF, not a new line.
func (s *sseSplitter) settleCR() {
	if s.scan == len(s.buf)-1 && s.buf[s.scan] == '\r' {
		s.scan = len(s.buf)
		s.terminator(s.scan)
		s.skipLF = true
	}
}

// eventData returns the joined "data" field of one SSE event ("data:" lines
// with one optional leading space stripped, joined by "\n"), and whether the
// event had any data line. The data of a one-line event aliases event.
func eventData(event []byte) ([]byte, bool) {
	var data []byte
	found, owned := false, false
	for len(event) > 0 {
		line := event
		event = nil
		if i := indexLineEnd(line); i >= 0 {
			line, event = line[:i], line[i+1:]
		}
		field, value, hasColon := bytes.Cut(line, []byte{':'})
		if string(field) != "data" {
			continue
		}
		if hasColon && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch {
		case !found:
			data = value // one data line, the usual case: aliased, not copied
		case !owned:
			// A second data line: data aliases event, so it is copied
			// before anything is appended.
			data = append(append(append(make([]byte, 0, len(data)+1+len(value)), data...), '\n'), value...)
			owned = true
		default:
			data = append(append(data, '\n'), value...)
		}
		found = true
	}
	return data, found
}

// forEachEvent calls fn with the data of each event in chunk, which holds
// whole events (as the splitter returns them). A final partial event (from a
// forced flush) is passed too; its JSON simply fails to parse.
func forEachEvent(chunk []byte, fn func(data []byte) error) error {
	for len(chunk) > 0 {
		n := eventLen(chunk)
		if data, ok := eventData(chunk[:n]); ok {
			if err := fn(data); err != nil {
				return err
			}
		}
		chunk = chunk[n:]
	}
	return nil
}

// eventLen returns the length of the first event in p including its
// terminating blank line, or len(p) if p holds no complete event.
func eventLen(p []byte) int {
	s := sseSplitter{buf: p, lineStart: true}
	s.advanceFirst()
	if s.end == 0 {
		return len(p)
	}
	return s.end
}

// advanceFirst is advance stopping at the first complete event.
func (s *sseSplitter) advanceFirst() {
	b := s.buf
	for i := 0; i < len(b); {
		switch b[i] {
		case '\n':
			i++
		case '\r':
			i++
			if i < len(b) && b[i] == '\n' {
				i++
			}
		default:
			s.lineStart = false
			i++
			continue
		}
		if s.lineStart {
			s.end = i
			return
		}
		s.lineStart = true
	}
}

// maxRunEvent bounds one event a run reads (readEvents), which must have
// it whole to parse it, unlike the tunnel, which relays an over-long event
// in pieces (maxSSEEvent). A server with a non-incremental tool parser
// sends a whole call in one chunk, several MiB when the model writes a
// file through a tool: as much as the calls of one answer may hold
// (adapter.MaxToolCallBytes). The splitter holds it only while the event
// is incomplete.
const maxRunEvent = adapter.MaxToolCallBytes

// readEventsBuffer is readEvents' read size (see there).
const readEventsBuffer = 4 << 10

// readEvents reads r to the end, calling fn with each event's data as soon as
// the event is complete.
//
// Through Read, the read buffer is held for the stream's whole life,
// mostly parked in Read between events of a few hundred bytes, so it is
// small: a larger event takes a few reads (the splitter joins them, up to
// maxRunEvent).
func readEvents(r io.Reader, fn func(data []byte) error) error {
	sp := newSSESplitter(maxRunEvent)
	if wt, ok := r.(io.WriterTo); ok {
		// A body that hands over its bytes as they arrive needs no buffer
		// here (h1client's: see relaySSE).
		if _, err := wt.WriteTo(writeFunc(func(p []byte) error { return forEachEvent(sp.push(p), fn) })); err != nil {
			return err
		}
		return forEachEvent(sp.flush(), fn)
	}
	buf := make([]byte, readEventsBuffer)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if ferr := forEachEvent(sp.push(buf[:n]), fn); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return forEachEvent(sp.flush(), fn)
		}
		if err != nil {
			return err
		}
	}
}
