package cli

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// utf8Chunker turns arbitrary byte chunks into valid UTF-8 text without
// splitting a multi-byte sequence across two outputs: an incomplete sequence
// at the end of a chunk is held back until the next one. Deltas travel in
// protobuf string fields, which must be valid UTF-8, so bytes that can never
// form a valid sequence are replaced with U+FFFD.
type utf8Chunker struct {
	pending []byte // at most utf8.UTFMax-1 bytes of an incomplete sequence
}

// next returns the text of p that can be emitted now.
func (c *utf8Chunker) next(p []byte) string {
	buf := p
	if len(c.pending) > 0 {
		buf = append(c.pending, p...)
	}
	cut := incompleteSuffix(buf)
	// Copy the held bytes: buf may alias p, which the caller reuses.
	c.pending = append(c.pending[:0:0], buf[cut:]...)
	return strings.ToValidUTF8(string(buf[:cut]), "\uFFFD")
}

// flush returns whatever is held back, at end of stream.
func (c *utf8Chunker) flush() string {
	s := strings.ToValidUTF8(string(c.pending), "\uFFFD")
	c.pending = nil
	return s
}

// incompleteSuffix returns the index where a trailing, possibly-valid but
// incomplete UTF-8 sequence starts, or len(b) when there is none.
func incompleteSuffix(b []byte) int {
	// Only the last UTFMax-1 bytes can belong to an incomplete sequence.
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}

// tailBuffer keeps the last limit bytes written to it. It holds up to
// twice that and cuts back to limit only when full, so each written byte
// is copied a bounded number of times: output streamed in small pieces (a
// CLI printing token by token) does not copy the whole window per piece.
type tailBuffer struct {
	limit int
	buf   []byte // the tail is its last limit bytes (bytes)
	total int64
}

func newTailBuffer(limit int) *tailBuffer { return &tailBuffer{limit: limit} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.total += int64(len(p))
	if len(p) >= t.limit {
		t.buf = append(t.buf[:0], p[len(p)-t.limit:]...)
		return len(p), nil
	}
	if len(t.buf)+len(p) > 2*t.limit {
		keep := t.limit - len(p)
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-keep:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// bytes returns the kept tail: the last limit bytes written (fewer before
// that many were).
func (t *tailBuffer) bytes() []byte {
	return t.buf[max(len(t.buf)-t.limit, 0):]
}

// text returns the kept tail as valid UTF-8, without a partial sequence the
// cut may have left at its start, and without surrounding white space.
func (t *tailBuffer) text() string {
	b := t.bytes()
	if t.total > int64(len(b)) {
		// The cut may have landed inside a sequence: skip its continuation
		// bytes.
		for n := 0; n < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); n++ {
			b = b[1:]
		}
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
}

// capture keeps the head and the tail of a stream so that a session id
// printed either early (a banner) or late (a summary) can be found without
// buffering the whole output.
type capture struct {
	head []byte
	tail *tailBuffer
}

func newCapture() *capture { return &capture{tail: newTailBuffer(captureWindow)} }

func (c *capture) Write(p []byte) (int, error) {
	if room := captureWindow - len(c.head); room > 0 {
		c.head = append(c.head, p[:min(room, len(p))]...)
	}
	return c.tail.Write(p)
}

// find returns group 1 of the first match in the head, else of the last
// match in the tail, if it is a plausible session id.
func (c *capture) find(re *regexp.Regexp) string {
	if m := re.FindSubmatch(c.head); m != nil {
		return plausibleID(string(m[1]))
	}
	if c.tail.total <= int64(len(c.head)) {
		return "" // the tail holds nothing the head did not
	}
	ms := re.FindAllSubmatch(c.tail.bytes(), -1)
	if len(ms) == 0 {
		return ""
	}
	return plausibleID(string(ms[len(ms)-1][1]))
}

// plausibleID returns id if it can safely become an argv element of later
// runs, else "". One starting with "-" would be read as an option; the
// CLI's output, which may echo what the client asked for, must not choose
// the CLI's options.
func plausibleID(id string) string {
	if id == "" || len(id) > 256 || !utf8.ValidString(id) || strings.HasPrefix(id, "-") {
		return ""
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ""
		}
	}
	return id
}
