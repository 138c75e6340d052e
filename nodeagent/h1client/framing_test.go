package h1client

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// verdict is what a reader made of a body section: the body bytes it
// returned, whether the body ended cleanly, and how many bytes of the
// section it took (the rest belongs to the connection's next response, so
// this decides whether the connection may be reused).
type verdict struct {
	body     []byte
	ok       bool
	consumed int
}

func (v verdict) String() string {
	return fmt.Sprintf("{ok:%v consumed:%d body:%s}", v.ok, v.consumed, quote(v.body))
}

func kindName(k framing) string {
	return map[framing]string{framingLength: "length", framingChunked: "chunked", framingClose: "close"}[k]
}

// quote is %q cut short: the excess cases run to 25 KiB.
func quote(b []byte) string {
	if len(b) <= 200 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q+…%d bytes…+%q", b[:120], len(b)-180, b[len(b)-60:])
}

// netHTTPVerdict is the reference: net/http reading the same bytes after a
// head that declares kind, with a bufio.Reader of readBuf bytes as the
// decoder is told it would have.
func netHTTPVerdict(kind framing, length int64, readBuf int, b []byte) verdict {
	head := "HTTP/1.1 200 OK\r\n"
	switch kind {
	case framingChunked:
		head += "Transfer-Encoding: chunked\r\n"
	case framingLength:
		head += fmt.Sprintf("Content-Length: %d\r\n", length)
	case framingClose:
		head += "Connection: close\r\n"
	}
	src := bytes.NewReader(append([]byte(head+"\r\n"), b...))
	br := bufio.NewReaderSize(src, readBuf)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		panic(fmt.Sprintf("the fixed head did not parse: %v", err))
	}
	body, err := io.ReadAll(resp.Body)
	return verdict{body: body, ok: err == nil, consumed: len(b) - br.Buffered() - src.Len()}
}

// pieceLen is the length of the i-th piece of what is left, rest bytes,
// as an upstream's reads might cut it: sizes cycle, and a zero size (or no
// sizes) takes the rest.
func pieceLen(sizes []int, i, rest int) int {
	if len(sizes) == 0 || sizes[i%len(sizes)] == 0 {
		return rest
	}
	return min(rest, sizes[i%len(sizes)])
}

// decoderVerdict feeds b to a new decoder in the given pieces, then closes
// the connection if the body has not ended: the decoder's view of the same
// bytes net/http read.
func decoderVerdict(t testing.TB, kind framing, length int64, readBuf int, b []byte, sizes []int) verdict {
	t.Helper()
	d := newDecoder(kind, length, readBuf)
	v := verdict{body: []byte{}}
	var scratch []byte
	fed := 0
	for i := 0; fed < len(b); i++ {
		piece := b[fed : fed+pieceLen(sizes, i, len(b)-fed)]
		// decode rewrites its argument: a copy keeps b intact for the
		// model and for the failure message.
		p := append(scratch[:0], piece...)
		scratch = p
		n, extra, err := d.decode(p)
		// The contract: body bytes and bytes after the body are both
		// parts of p, and extra is only reported at the end.
		if n < 0 || extra < 0 || n+extra > len(p) || (extra > 0 && !d.done()) {
			t.Errorf("decode(%s) at offset %d of %s = (n %d, extra %d, err %v, done %v): outside p",
				quote(piece), fed, quote(b), n, extra, err, d.done())
		}
		v.body = append(v.body, p[:max(0, min(n, len(p)))]...)
		fed += len(p)
		if err != nil {
			return v
		}
		if d.done() {
			// past: trailer bytes of this or earlier pieces that
			// textproto left after an earlier (bare LF) blank line.
			v.ok, v.consumed = true, fed-extra-d.past()
			return v
		}
	}
	if d.done() {
		// An empty section of a zero Content-Length.
		v.ok, v.consumed = true, fed
		return v
	}
	v.ok, v.consumed = d.eof() == nil, fed
	return v
}

// checkAgainstNetHTTP fails t when the decoder, fed b in pieces of sizes,
// disagrees with net/http, and returns net/http's verdict.
func checkAgainstNetHTTP(t testing.TB, kind framing, length int64, readBuf int, b []byte, sizes []int) verdict {
	t.Helper()
	want := netHTTPVerdict(kind, length, readBuf, b)
	got := decoderVerdict(t, kind, length, readBuf, b, sizes)
	// consumed only matters for a body that ended: a failed one closes
	// the connection whatever was read.
	if got.ok != want.ok || !bytes.Equal(got.body, want.body) || (want.ok && got.consumed != want.consumed) {
		t.Errorf("%s, length %d, readBuf %d, pieces %v, input %s:\n net/http %v\n decoder  %v",
			kindName(kind), length, readBuf, sizes, quote(b), want, got)
	}
	return want
}

func sseChunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// manyChunks is n one-byte chunks "A" whose size lines carry an extension
// of ext bytes: ext-14 bytes of excess overhead each (net/http's measure).
func manyChunks(n, ext int) string {
	return strings.Repeat("1;"+strings.Repeat("x", ext)+"\r\nA\r\n", n)
}

// sizeLine is a chunk of "hello" whose size line is l bytes before CRLF.
func sizeLine(l int) string {
	return "5;" + strings.Repeat("x", l-2) + "\r\nhello\r\n0\r\n\r\n"
}

type framingCase struct {
	name    string
	kind    framing // zero: chunked
	length  int64
	readBuf int // zero: DefaultReadBufferSize
	in      string
	ok      bool
	body    string
	left    int // ok only: bytes of in after the body
}

var sse = sseChunk("data: {\"id\":1,\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n") +
	sseChunk("data: {\"id\":1,\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n") +
	sseChunk("data: [DONE]\n\n") + "0\r\n\r\n"

var framingCases = []framingCase{
	{name: "chunk data not followed by CRLF", in: "2\r\nokX\n0\r\n\r\n", ok: false, body: "ok"},
	{name: "size line without digits", in: "\r\n\r\n", ok: false},
	{name: "size line of an extension only", in: ";x\r\n\r\n", ok: false},
	{name: "chunk data followed by LF only", in: "2\r\nok\n0\r\n\r\n", ok: false, body: "ok"},
	{name: "sse", in: sse, ok: true, body: "data: {\"id\":1,\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"id\":1,\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\ndata: [DONE]\n\n"},
	{name: "empty chunked body", in: "0\r\n\r\n", ok: true},
	{name: "zeros in last size", in: "000\r\n\r\n", ok: true},
	{name: "extension", in: "5;foo=bar\r\nhello\r\n0;x\r\n\r\n", ok: true, body: "hello"},
	{name: "extension with CR-free bytes", in: "5;a=\"b c\"\x00\xff\r\nhello\r\n0\r\n\r\n", ok: true, body: "hello"},
	{name: "trailing whitespace", in: "5 \t\r\nhello\r\n0\t\r\n\r\n", ok: true, body: "hello"},
	{name: "extension then whitespace", in: "5;x \t\r\nhello\r\n0\r\n\r\n", ok: true, body: "hello"},
	// net/http trims only trailing whitespace, then cuts the extension:
	// "5 " is left and does not parse.
	{name: "whitespace before extension", in: "5 ;x\r\nhello\r\n0\r\n\r\n"},
	{name: "leading whitespace", in: " 5\r\nhello\r\n0\r\n\r\n"},
	{name: "empty size", in: "\r\nhello\r\n0\r\n\r\n"},
	{name: "extension without size", in: ";x\r\nhello\r\n0\r\n\r\n"},
	{name: "uppercase hex", in: "A\r\n0123456789\r\n0\r\n\r\n", ok: true, body: "0123456789"},
	{name: "mixed case hex", in: "aB\r\n" + strings.Repeat("z", 0xab) + "\r\n0\r\n\r\n", ok: true, body: strings.Repeat("z", 0xab)},
	{name: "16 hex digits", in: "000000000000000a\r\n0123456789\r\n0\r\n\r\n", ok: true, body: "0123456789"},
	{name: "17 hex digits", in: "0000000000000000a\r\n0123456789\r\n0\r\n\r\n"},
	{name: "17 hex digit last chunk", in: "5\r\nhello\r\n00000000000000000\r\n\r\n", body: "hello"},
	{name: "max size truncated", in: "ffffffffffffffff\r\nabc", body: "abc"},
	{name: "bare LF size line", in: "5\nhello\r\n0\r\n\r\n"},
	{name: "bare LF after extension", in: "5;x\nhello\r\n0\r\n\r\n"},
	{name: "bare LF after data", in: "5\r\nhello\n0\r\n\r\n", body: "hello"},
	{name: "bare LF last chunk", in: "5\r\nhello\r\n0\n\r\n", body: "hello"},
	{name: "CR in size line", in: "5\r;x\r\nhello\r\n0\r\n\r\n"},
	{name: "CR in extension", in: "5;a\rb\r\nhello\r\n0\r\n\r\n"},
	{name: "CR CR LF", in: "5\r\r\nhello\r\n0\r\n\r\n"},
	{name: "missing CRLF after data", in: "5\r\nhelloX\r\n0\r\n\r\n", body: "hello"},
	{name: "next size glued to data", in: "5\r\nhello0\r\n\r\n", body: "hello"},
	{name: "trailer", in: "5\r\nhello\r\n0\r\nX-A: b\r\nX-B: c\r\n\r\n", ok: true, body: "hello"},
	{name: "trailer with folded line", in: "0\r\nX-A: b\r\n c\r\n\r\n", ok: true},
	{name: "malformed trailer", in: "5\r\nhello\r\n0\r\nbad\r\n\r\n", body: "hello"},
	{name: "trailer starting with a fold", in: "0\r\n X-A: b\r\n\r\n"},
	{name: "trailer without end", in: "0\r\nX-A: b\r\n"},
	{name: "too long trailer", in: "0\r\nX-A: " + strings.Repeat("b", 5000) + "\r\n\r\n"},
	// Exactly the read buffer: net/http's Peek still sees the blank line.
	{name: "trailer filling the buffer", readBuf: 64, in: "0\r\nX-A: " + strings.Repeat("b", 55) + "\r\n\r\n", ok: true},
	{name: "trailer one past the buffer", readBuf: 64, in: "0\r\nX-A: " + strings.Repeat("b", 56) + "\r\n\r\n"},
	// textproto stops at the bare-LF blank line; net/http leaves the rest
	// to the connection.
	{name: "trailer ended by bare LF", in: "0\r\nX-A: b\n\njunk\r\n\r\n", ok: true, left: len("junk\r\n\r\n")},
	{name: "bare LF trailer without CRLFCRLF", in: "0\r\n\n"},
	{name: "excess overhead", in: manyChunks(600, 50) + "0\r\n\r\n", body: strings.Repeat("A", 455)},
	{name: "overhead paid by data", in: manyChunks(455, 50) + sseChunk(strings.Repeat("d", 100)) + manyChunks(5, 50) + "0\r\n\r\n",
		ok: true, body: strings.Repeat("A", 455) + strings.Repeat("d", 100) + strings.Repeat("A", 5)},
	// 450 chunks leave 16200 bytes of excess, and the last size line adds
	// 188: net/http computes the excess error, then overwrites it with the
	// last chunk's io.EOF and accepts the body.
	{name: "excess reached by the last size line", in: manyChunks(450, 50) + "0;" + strings.Repeat("y", 200) + "\r\n\r\n",
		ok: true, body: strings.Repeat("A", 450)},
	{name: "size line of 4094", in: sizeLine(4094), ok: true, body: "hello"},
	{name: "size line of 4095", in: sizeLine(4095)},
	{name: "size line of 4096", in: sizeLine(4096)},
	{name: "size line of 4095, large buffer", readBuf: 8192, in: sizeLine(4095), ok: true, body: "hello"},
	{name: "size line of 4096, large buffer", readBuf: 8192, in: sizeLine(4096)},
	{name: "size line of 62, small buffer", readBuf: 64, in: sizeLine(62), ok: true, body: "hello"},
	{name: "size line of 63, small buffer", readBuf: 64, in: sizeLine(63)},
	{name: "bytes after last chunk", in: "5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n", ok: true, body: "hello", left: 17},
	{name: "bytes after trailer", in: "0\r\nX-A: b\r\n\r\nxyz", ok: true, left: 3},
	{name: "empty section", in: ""},
	{name: "truncated in size", in: "5"},
	{name: "truncated in size CRLF", in: "5\r"},
	{name: "truncated in data", in: "5\r\nhel", body: "hel"},
	{name: "truncated before CRLF", in: "5\r\nhello", body: "hello"},
	{name: "truncated in CRLF", in: "5\r\nhello\r", body: "hello"},
	{name: "no last chunk", in: "5\r\nhello\r\n", body: "hello"},
	{name: "no blank line", in: "5\r\nhello\r\n0\r\n", body: "hello"},
	{name: "half blank line", in: "5\r\nhello\r\n0\r\n\r", body: "hello"},
	{name: "length exact", kind: framingLength, length: 5, in: "hello", ok: true, body: "hello"},
	{name: "length shorter than N", kind: framingLength, length: 10, in: "hello", body: "hello"},
	{name: "length longer than N", kind: framingLength, length: 5, in: "hello world", ok: true, body: "hello", left: 6},
	{name: "length zero", kind: framingLength, length: 0, in: "x", ok: true, left: 1},
	{name: "length zero, nothing", kind: framingLength, length: 0, in: "", ok: true},
	{name: "close delimited", kind: framingClose, in: "5\r\nhello\r\n0\r\n", ok: true, body: "5\r\nhello\r\n0\r\n"},
	{name: "close delimited, nothing", kind: framingClose, in: "", ok: true},
}

// TestDecoderFramingCases checks each case's expected outcome, fed whole
// and a byte at a time, and compares it with net/http at other buffer
// sizes too, where the expected outcome may differ but the two must not.
func TestDecoderFramingCases(t *testing.T) {
	for _, c := range framingCases {
		t.Run(c.name, func(t *testing.T) {
			kind, readBuf := c.kind, c.readBuf
			if kind == 0 {
				kind = framingChunked
			}
			if readBuf == 0 {
				readBuf = DefaultReadBufferSize
			}
			in := []byte(c.in)
			consumed := len(in) - c.left
			if !c.ok {
				consumed = 0
			}
			want := verdict{body: []byte(c.body), ok: c.ok, consumed: consumed}
			ref := netHTTPVerdict(kind, c.length, readBuf, in)
			if ref.ok != want.ok || !bytes.Equal(ref.body, want.body) || (want.ok && ref.consumed != want.consumed) {
				t.Errorf("net/http: %v, the case expects %v", ref, want)
			}
			for _, sizes := range [][]int{nil, {1}} {
				got := decoderVerdict(t, kind, c.length, readBuf, in, sizes)
				if got.ok != want.ok || !bytes.Equal(got.body, want.body) || (want.ok && got.consumed != want.consumed) {
					t.Errorf("pieces %v: decoder %v, want %v", sizes, got, want)
				}
			}
			for _, rb := range []int{64, 17} {
				checkAgainstNetHTTP(t, kind, c.length, rb, in, nil)
				checkAgainstNetHTTP(t, kind, c.length, rb, in, []int{1})
			}
		})
	}
}

// TestDecoderFailureIsSticky: after an error the decoder takes nothing
// more, so a caller cannot resume a body it was told is broken.
func TestDecoderFailureIsSticky(t *testing.T) {
	d := newDecoder(framingChunked, 0, DefaultReadBufferSize)
	if _, _, err := d.decode([]byte("5\nhello")); err == nil {
		t.Fatal("a bare LF size line was accepted")
	}
	if n, extra, err := d.decode([]byte("0\r\n\r\n")); n != 0 || extra != 0 || err == nil {
		t.Fatalf("after an error decode = (%d, %d, %v), want (0, 0, the error)", n, extra, err)
	}
	if d.eof() == nil || d.done() {
		t.Fatal("a failed body ended cleanly at EOF")
	}
}

// FuzzDecoderMatchesNetHTTP: for any body section, framing, buffer size
// and split into reads, the decoder returns the body net/http returns,
// fails when net/http fails and, when the body ends, leaves the same bytes
// to the connection.
func FuzzDecoderMatchesNetHTTP(f *testing.F) {
	add := func(kind, lenByte, bufByte byte, in string, sizes ...byte) {
		f.Add(kind, lenByte, bufByte, []byte(in), sizes)
	}
	for _, c := range framingCases {
		kind := byte(1) // framingChunked under kindByte%3+1
		switch c.kind {
		case framingLength:
			kind = 0
		case framingClose:
			kind = 2
		}
		add(kind, byte(c.length), 0, c.in)
		// The fuzzer minimises each new input for up to a minute, and
		// the 16 KiB excess inputs take all of it: once is enough there.
		if len(c.in) < 8<<10 {
			add(kind, byte(c.length), 1, c.in, 1)
			add(kind, byte(c.length), 5, c.in, 3, 7, 0)
		}
	}
	add(0, 12, 0, "hello world and more", 4)
	add(1, 0, 2, "0\r\nX-A: "+strings.Repeat("b", 40)+"\r\n\r\n", 9)
	f.Fuzz(func(t *testing.T, kindByte, lenByte, bufByte byte, raw, splitSizes []byte) {
		kind := framing(kindByte%3) + 1
		// A small Content-Length around the input's own, so that short,
		// exact and long bodies all come up.
		length := int64(lenByte) % int64(len(raw)+9)
		// net/http's default, a small buffer that long lines and trailers
		// overflow, and odd sizes down to bufio's minimum of 16.
		readBuf := [3]int{DefaultReadBufferSize, 64, 16 + int(bufByte/3)%64}[bufByte%3]
		sizes := make([]int, len(splitSizes))
		for i, s := range splitSizes {
			sizes[i] = int(s)
		}
		checkAgainstNetHTTP(t, kind, length, readBuf, raw, sizes)
	})
}
