package adapter

import (
	"io"
	"time"
)

// DrainBody reads and discards at most limit bytes of what is left of an
// upstream answer's body, for at most within, so that its connection goes
// back to the keep-alive pool (net/http and h1client drop a connection whose
// body is closed unread). A body longer or slower than that is closed,
// losing the connection: neither bound depends on the peer. limit ≤ 0 reads
// nothing; within ≤ 0 leaves the read no time (the body is closed as the
// timer fires).
func DrainBody(body io.ReadCloser, limit int64, within time.Duration) {
	t := time.AfterFunc(within, func() { _ = body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, limit))
	t.Stop()
}
