package nodewire

import "sync"

// Receive buffers. A stream's unread bytes live in a buffer taken when a
// frame arrives for a stream that holds none and handed back as soon as
// the reader drained it, so streamed chunks do not cost an allocation each
// and a held stream keeps no buffer while it waits. Two size classes keep
// a small SSE event from pinning a large buffer.
const (
	recvSmall = 2 << 10
	recvLarge = MaxBodyChunk + 1024 // a whole tunnel body frame and its envelope
)

var (
	recvSmallPool = sync.Pool{New: func() any { b := make([]byte, 0, recvSmall); return &b }}
	recvLargePool = sync.Pool{New: func() any { b := make([]byte, 0, recvLarge); return &b }}
)

// getRecvBuf returns an empty buffer for at least n bytes (a pooled one
// when n fits a class; append grows it otherwise).
func getRecvBuf(n int) []byte {
	switch {
	case n <= recvSmall:
		return (*recvSmallPool.Get().(*[]byte))[:0]
	case n <= recvLarge:
		return (*recvLargePool.Get().(*[]byte))[:0]
	}
	return make([]byte, 0, n)
}

// putRecvBuf hands b back when it is exactly one of the classes (a buffer
// append grew beyond its class is left to the collector). The caller keeps
// no reference to b.
func putRecvBuf(b []byte) {
	switch cap(b) {
	case recvSmall:
		b = b[:0]
		recvSmallPool.Put(&b)
	case recvLarge:
		b = b[:0]
		recvLargePool.Put(&b)
	}
}
