package gateway

import (
	"bytes"
	"net/http"
)

// The edge's event streams: their fixed headers, and finding the
// [DONE] marker in a relayed stream.

const sseType = "text/event-stream"

// The values of the fixed headers of the edge's event streams, one slice
// each shared by every response instead of Header.Set's new one per
// header and stream, which the handler's header map then holds for the
// stream's life. Sharing is safe: net/http and gin only read a response's
// header values (WriteHeader copies them into its own clone), Set replaces
// the slice, and Add appends to a full slice, which copies it. Never write
// into these (their one element) nor hand them out for writing.
var (
	sseTypeValues     = []string{sseType}
	noCacheValues     = []string{"no-cache"}
	noBufferingValues = []string{"no"}
)

// setNoBuffering asks proxies in front of the edge (nginx honours it) not
// to buffer the stream.
func setNoBuffering(h http.Header) { h["X-Accel-Buffering"] = noBufferingValues }

// setSSEHeaders sets the headers of an event stream the edge writes
// itself (a run's).
func setSSEHeaders(h http.Header) {
	h["Content-Type"] = sseTypeValues
	h["Cache-Control"] = noCacheValues
	setNoBuffering(h)
}

var sseDone = []byte("data: [DONE]")

// hasSSEDone reports whether b contains sseDone (bytes.Contains). It runs
// for every streamed chunk, and a search led by sseDone's 'd' stops at
// every "data:" and "delta" of a chunk; led by its tail's 'D' it rarely
// stops before the end.
func hasSSEDone(b []byte) bool {
	const head = len("data: [")
	tail := sseDone[head:]
	for i := 0; ; {
		j := bytes.Index(b[i:], tail)
		if j < 0 {
			return false
		}
		at := i + j
		if at >= head && bytes.Equal(b[at-head:at], sseDone[:head]) {
			return true
		}
		i = at + 1
	}
}

// doneLine reports whether b holds sseDone ended by a line break: the
// [DONE] event, which JSON text cannot contain (its line breaks are
// escaped). A marker split from its line break by a frame boundary is
// not seen; only what follows a seen one is treated as after the end.
func doneLine(b []byte) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], sseDone)
		if j < 0 {
			return false
		}
		end := i + j + len(sseDone)
		if end < len(b) && (b[end] == '\n' || b[end] == '\r') {
			return true
		}
		i = end
	}
}

// doneScan finds sseDone in a stream that arrives in pieces: a node may
// split it across two BODY frames at any byte, so the last
// len(sseDone)-1 bytes of what came before are searched with the head of
// each new piece.
type doneScan struct {
	tail [len("data: [DONE]") - 1]byte
	n    int // bytes of tail in use
}

// seen reports whether sseDone ends in b or straddles b and what came
// before it. A straddling marker ends with its ']' among b's first
// len(tail) bytes; a chunk of JSON never starts with one, so the joint is
// searched only then.
func (d *doneScan) seen(b []byte) bool {
	const keep = len(d.tail)
	found := hasSSEDone(b)
	if !found && d.n > 0 && bytes.IndexByte(b[:min(len(b), keep)], ']') >= 0 {
		var joint [2 * keep]byte
		j := copy(joint[:], d.tail[:d.n])
		j += copy(joint[j:], b[:min(len(b), keep)])
		found = hasSSEDone(joint[:j])
	}
	if len(b) >= keep {
		d.n = copy(d.tail[:], b[len(b)-keep:])
		return found
	}
	var joint [2 * keep]byte
	j := copy(joint[:], d.tail[:d.n])
	j += copy(joint[j:], b)
	d.n = copy(d.tail[:], joint[max(j-keep, 0):j])
	return found
}
