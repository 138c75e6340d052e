package openaiapi

// Changes of the fortieth pass whose altered forms no test can tell
// apart, and why (each was applied and the relevant tests run):
//
//   - textToolScanner.compact without its first case (nothing dropped):
//     the default case then copies the held bytes onto themselves.
//   - droppedStatusHeader's count in tunnelSink.Status taken over every
//     header, dropped ones included: the block is only larger.
//   - tunnelSink.Status building its slice when n == 0 too: an empty
//     slice and nil encode the same.
//   - openaicompat's responseHeaders reading Connection as
//     h["Connection"] rather than h.Values("Connection"): Values
//     canonicalizes its argument, which already is.
//   - openaicompat's parseConfig without TrimRight on base.String():
//     parseBaseURL already trims the path's trailing slashes, so the
//     string never ends in one.
//   - anthropicapi's tool: the stream's bound checked after closeBlock on
//     the live path: the chunk fails as malformed either way, and a failed
//     stream's later output is the caller's error event.
//   - nodewire's RecvLent decoding non-BODY tunnel frames from a copy
//     again (tunnelFrame never set, or the copy taken for them too), or
//     every tunnelled request with decodeGeneric: both decoders copy
//     what they keep, so only allocations differ, which no alloc test of
//     those frames measures.
//   - textToolScanner.drop without moving the marks: unreachable. Marks
//     are placed between feeds at the held length, and a feed's first
//     drop of n > 0 bytes comes after emitHeld or emitMarks took every
//     mark at or before n, which all are (what is held between feeds is
//     a partial open tag, or an open block whose close tag ends past it);
//     later drops of that feed find none.

import (
	"strings"
	"testing"
	"unsafe"
)

// TestToolScannerBufferAfterFeed41m: feed lets what it emitted go by
// reslicing and, once it returns, moves what is still held back to the
// front of its buffer, so a stream of small blocks reuses one small
// buffer; a buffer grown past maxIdleHold for a long block is let go
// once nothing is held.
func TestToolScannerBufferAfterFeed41m(t *testing.T) {
	emit := func(segment) {}
	s := textToolScanner{offered: offeredSet([]string{"f"})}
	block := `x<tool_call>{"name":"f","arguments":{}}</tool_call>y<tool_ca`
	s.feed(block, emit)
	if string(s.buf) != "<tool_ca" {
		t.Fatalf("held %q, want the partial tag", s.buf)
	}
	at, c := unsafe.SliceData(s.buf), cap(s.buf)
	for i := range 20 {
		s.feed(`ll>{"name":"f","arguments":{}}</tool_call>z<tool_ca`, emit)
		if string(s.buf) != "<tool_ca" || unsafe.SliceData(s.buf) != at || cap(s.buf) != c {
			t.Fatalf("feed %d: held %q elsewhere than at the front of the same buffer", i, s.buf)
		}
	}
	s.feed(`ll>{"name":"f","arguments":{}}</tool_call>`, emit)
	if len(s.buf) != 0 || unsafe.SliceData(s.buf) != at || cap(s.buf) != c {
		t.Fatalf("nothing held: buffer %d long of %d, want the small buffer kept for reuse", len(s.buf), cap(s.buf))
	}

	long := "<tool_call>" + strings.Repeat("a", 4*maxIdleHold) + "</tool_call>"
	s.feed(long[:len(long)/2], emit)
	s.feed(long[len(long)/2:], emit)
	if s.buf != nil {
		t.Fatalf("after a long block nothing is held, yet a buffer of %d is kept", cap(s.buf))
	}
}

// TestHoldReleasesPastMaxHeldPieces41m: the hold keeps exactly
// maxHeldPieces pieces apart and releases at the next one, not before.
func TestHoldReleasesPastMaxHeldPieces41m(t *testing.T) {
	h := newToolHolder(offered)
	h.push("<tool_cal")
	for i := range maxHeldPieces {
		h.pushReasoning("r")
		if text, reasoning := holdOut(h); text+reasoning != 0 {
			t.Fatalf("piece %d of %d released %d bytes", i+1, maxHeldPieces, text+reasoning)
		}
	}
	h.pushReasoning("r")
	if text, reasoning := holdOut(h); text != len("<tool_cal") || reasoning != maxHeldPieces+1 {
		t.Fatalf("past the bound: released %d text and %d reasoning bytes, want all of it", text, reasoning)
	}
}
