package nodewire

import (
	"sync"
	"sync/atomic"
)

// Receive buffers. A stream's unread bytes live in a buffer taken when a
// frame arrives for a stream that holds none and handed back as soon as
// the reader drained it, so streamed chunks do not cost an allocation each
// and a held stream keeps no buffer while it waits. Two size classes keep
// a small SSE event from pinning a large buffer.
const (
	recvSmall = 2 << 10
	recvLarge = MaxBodyChunk + 1024 // a whole tunnel body frame and its envelope
)

// The pools hold pointers to arrays, not to slice headers: a slice is
// turned back into its array's pointer when handed back, so neither a Get
// nor a Put allocates (putting &b would allocate a header per Put, one a
// received chunk).
var (
	recvSmallPool = sync.Pool{New: func() any { return new([recvSmall]byte) }}
	recvLargePool = sync.Pool{New: func() any { return new([recvLarge]byte) }}
)

// getRecvBuf returns an empty buffer for at least n bytes (a pooled one
// when n fits a class; append grows it otherwise).
func getRecvBuf(n int) []byte {
	switch {
	case n <= recvSmall:
		return recvSmallPool.Get().(*[recvSmall]byte)[:0]
	case n <= recvLarge:
		return recvLargePool.Get().(*[recvLarge]byte)[:0]
	}
	return make([]byte, 0, n)
}

// putRecvBuf hands b back when it is exactly one of the classes (a buffer
// append grew beyond its class is left to the collector). The caller keeps
// no reference to b.
func putRecvBuf(b []byte) {
	if poisonRecvBufs.Load() {
		poison(b[:cap(b)])
	}
	switch cap(b) {
	case recvSmall:
		recvSmallPool.Put((*[recvSmall]byte)(b[:recvSmall]))
	case recvLarge:
		recvLargePool.Put((*[recvLarge]byte)(b[:recvLarge]))
	}
}

// poisonRecvBufs, set by tests, makes putRecvBuf overwrite every buffer it
// is handed, so that a decoded frame still pointing into one (a lent body
// used after the next receive, an envelope decoded without a copy of its
// own) reads garbage at once instead of only when a pool happens to hand
// the buffer out again.
var poisonRecvBufs atomic.Bool

func poison(b []byte) {
	for i := range b {
		b[i] = 0xAA
	}
}
