package h1client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/textproto"
)

// framing is how a response body ends (RFC 9112 §6.3).
type framing uint8

const (
	framingLength  framing = iota + 1 // after Content-Length bytes
	framingChunked                    // after the last chunk and the trailer section
	framingClose                      // when the upstream closes the connection
)

// Limits of the chunked framing, net/http's own (net/http/internal's
// chunkedReader and transfer.go's readTrailer), so that a body this
// decoder accepts is one net/http accepts and the reverse.
const (
	// maxChunkLine bounds a chunk-size line without its CRLF (net/http's
	// maxLineLength); the connection's read buffer bounds it too, as
	// net/http's bufio.Reader does (lineMax).
	maxChunkLine = 4096
	// maxChunkExcess bounds the framing bytes (size lines, extensions,
	// CRLFs) beyond 16 per chunk and twice its data: a sender must not
	// make the node read without end for a trickle of body bytes.
	maxChunkExcess = 16 << 10
	// maxHexDigits: a chunk size fits 64 bits.
	maxHexDigits = 16
)

// Errors of a malformed body. They end the body; the connection is closed.
var (
	errChunkLine     = errors.New("h1client: malformed chunked encoding")
	errChunkLong     = errors.New("h1client: chunk-size line too long")
	errChunkSize     = errors.New("h1client: chunk length too large")
	errChunkExcess   = errors.New("h1client: chunked encoding contains too much non-data")
	errTrailerLong   = errors.New("h1client: suspiciously long trailer after chunked body")
	errTrailerHeader = errors.New("h1client: malformed trailer")
)

// decState is where a chunked body's decoder stands.
type decState uint8

const (
	stSize    decState = iota // chunk-size hex digits
	stSizeWS                  // whitespace after the size
	stExt                     // a chunk extension, up to CR
	stSizeLF                  // the size line's LF
	stData                    // chunk data
	stDataCR                  // the CR after a chunk's data
	stDataLF                  // its LF
	stTrailer                 // the trailer section after the last chunk
	stDone                    // the body ended; later bytes are not its
)

// decoder decodes a response body's framing from bytes in whatever pieces
// they arrive, keeping only counters between pieces (never the bytes), so
// a reader can park between them without a buffer. Only a trailer section,
// which LLM servers do not send, is kept until its end (at most the read
// buffer's size). It accepts what net/http's readers accept, checked against them
// by FuzzDecoderMatchesNetHTTP.
type decoder struct {
	kind    framing
	state   decState // chunked only
	n       uint64   // length: bytes left; chunked: bytes left of the chunk, or the size read so far
	digits  int      // hex digits of the current size line
	line    int      // bytes of the current size line so far, CR and LF included
	excess  int64    // framing overhead beyond what the data pays for (net/http's measure)
	lineMax int      // a size line, CRLF included, is at most this long
	bufMax  int      // a trailer section, blank line included, is at most this long
	trailer []byte   // the trailer section so far (stTrailer)
	// overrun counts the bytes of a trailer section after the blank line
	// textproto stopped at (see past).
	overrun int
	err     error // sticky
}

// newDecoder returns a decoder for a body framed by kind; length is the
// Content-Length for framingLength, and readBuf the read buffer net/http
// would have parsed with (it bounds lines and trailers as bufio does).
func newDecoder(kind framing, length int64, readBuf int) *decoder {
	d := &decoder{kind: kind, lineMax: min(readBuf, maxChunkLine+1), bufMax: readBuf}
	if kind == framingLength {
		d.n = uint64(length)
		if length <= 0 {
			d.state = stDone
		}
	}
	return d
}

// done reports whether the body has ended.
func (d *decoder) done() bool { return d.state == stDone }

// decode consumes p, moving the body bytes it carries to the front of p:
// the body's next bytes are p[:n]. extra counts the bytes of p after the
// body's end (the connection then cannot be reused). After an error the
// decoder stays failed; p[:n] are still body bytes that came before it.
func (d *decoder) decode(p []byte) (n, extra int, err error) {
	if d.err != nil {
		return 0, 0, d.err
	}
	switch d.kind {
	case framingClose:
		return len(p), 0, nil
	case framingLength:
		if d.state == stDone {
			return 0, len(p), nil
		}
		if uint64(len(p)) < d.n {
			d.n -= uint64(len(p))
			return len(p), 0, nil
		}
		n = int(d.n)
		d.n, d.state = 0, stDone
		return n, len(p) - n, nil
	}
	i := 0
	for i < len(p) {
		switch d.state {
		case stData:
			k := uint64(len(p) - i)
			if k > d.n {
				k = d.n
			}
			n += copy(p[n:], p[i:i+int(k)])
			i += int(k)
			if d.n -= k; d.n == 0 {
				d.state = stDataCR
			}
			continue
		case stTrailer:
			used, err := d.trailerBytes(p[i:])
			i += used
			if err != nil {
				return n, 0, d.fail(err)
			}
			continue
		case stDone:
			return n, len(p) - i, nil
		}
		if err := d.step(p[i]); err != nil {
			return n, 0, d.fail(err)
		}
		i++
	}
	return n, 0, nil
}

// past counts bytes already taken (in extra's piece or earlier ones) that
// turned out to lie beyond the body's end: a trailer section that
// textproto ended at a blank line before the one this decoder waited for.
// Like extra, they mean the connection cannot be reused.
func (d *decoder) past() int { return d.overrun }

// step takes one byte of a size line or of a chunk's closing CRLF. A size
// line is net/http's: hex digits, then spaces or tabs, or a ';' and an
// extension it ignores, then CRLF with no other CR or LF in it.
func (d *decoder) step(c byte) error {
	switch d.state {
	case stDataCR:
		if c != '\r' {
			return errChunkLine
		}
		d.state = stDataLF
		return nil
	case stDataLF:
		if c != '\n' {
			return errChunkLine
		}
		d.state, d.n, d.digits, d.line = stSize, 0, 0, 0
		return nil
	}
	if d.line++; d.line > d.lineMax {
		return errChunkLong
	}
	switch d.state {
	case stSize:
		if v, ok := hexValue(c); ok {
			if d.digits == maxHexDigits {
				return errChunkSize
			}
			d.n, d.digits = d.n<<4|uint64(v), d.digits+1
			return nil
		}
		if d.digits == 0 {
			return errChunkLine
		}
		switch c {
		case ';':
			d.state = stExt
		case ' ', '\t':
			d.state = stSizeWS
		case '\r':
			d.state = stSizeLF
		default:
			return errChunkLine
		}
	case stSizeWS:
		switch c {
		case ' ', '\t':
		case '\r':
			d.state = stSizeLF
		default:
			// net/http trims trailing whitespace before it cuts the
			// extension, so "5 ;x" leaves "5 " to parse, which fails.
			return errChunkLine
		}
	case stExt:
		switch c {
		case '\r':
			d.state = stSizeLF
		case '\n':
			return errChunkLine
		}
	case stSizeLF:
		if c != '\n' {
			return errChunkLine
		}
		return d.endSizeLine()
	}
	return nil
}

// endSizeLine applies net/http's overhead rule to a complete size line and
// starts the chunk (or the trailer after the last one).
func (d *decoder) endSizeLine() error {
	// The same arithmetic as net/http's chunkedReader, wrap-around of a
	// size past 2^63 included, so that both give up on the same bodies.
	d.excess += int64(d.line)
	d.excess -= 16 + (2 * int64(d.n))
	d.excess = max(d.excess, 0)
	if d.n == 0 {
		// The last chunk: net/http's end of body overrides its excess
		// verdict on the same line.
		d.state = stTrailer
		return nil
	}
	if d.excess > maxChunkExcess {
		return errChunkExcess
	}
	d.state = stData
	return nil
}

// trailerBytes takes bytes of the trailer section and reports how many
// are the trailer's. Like net/http, an empty section (CRLF) ends at once;
// any other must show its blank line within bufMax bytes and parse as
// header fields, which are then dropped (the node does not relay them).
func (d *decoder) trailerBytes(p []byte) (int, error) {
	if len(d.trailer) == 0 && len(p) >= 2 && p[0] == '\r' && p[1] == '\n' {
		d.state = stDone
		return 2, nil
	}
	// Taken a byte at a time up to the blank line: a section is short
	// when there is one at all.
	for i, c := range p {
		if len(d.trailer) == d.bufMax {
			return i, errTrailerLong
		}
		d.trailer = append(d.trailer, c)
		if len(d.trailer) == 2 && bytes.Equal(d.trailer, crlf) {
			d.trailer, d.state = nil, stDone
			return i + 1, nil
		}
		if len(d.trailer) >= 4 && bytes.HasSuffix(d.trailer, doubleCRLF) {
			return i + 1, d.parseTrailer()
		}
	}
	return len(p), nil
}

var (
	crlf       = []byte("\r\n")
	doubleCRLF = []byte("\r\n\r\n")
)

// parseTrailer parses the section with net/textproto, as net/http does.
// textproto may stop at an earlier blank line (a bare LF one): the bytes
// after it are then not the body's, and d.overrun counts them.
func (d *decoder) parseTrailer() error {
	src := bytes.NewReader(d.trailer)
	br := bufio.NewReaderSize(src, len(d.trailer))
	_, err := textproto.NewReader(br).ReadMIMEHeader()
	d.overrun = br.Buffered() + src.Len()
	d.trailer, d.state = nil, stDone
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return errors.Join(errTrailerHeader, err)
	}
	return nil
}

// eof is the upstream's close: the end of a close-delimited body, and a
// cut-off one otherwise.
func (d *decoder) eof() error {
	if d.err != nil {
		return d.err
	}
	if d.state == stDone || d.kind == framingClose {
		d.state = stDone
		return nil
	}
	return d.fail(io.ErrUnexpectedEOF)
}

func (d *decoder) fail(err error) error {
	d.err = err
	return err
}

func hexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
