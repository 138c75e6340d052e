package gateway

import (
	"fmt"
	"net/http"
	"time"
)

// deadlineWriter bounds every write to the client by the write timeout, so a
// client that stops reading is detected (write_error) instead of holding
// the lease forever.
//
// Setting a deadline costs a timer update in the runtime; a stream writes
// and flushes every chunk. So the deadline is moved only when at least
// 1/16 of the timeout has passed since it was last set: every write still
// has at least 15/16 of the timeout (e.g. 28 s of 30 s), and a stream
// re-arms it at most 16 times per timeout instead of twice per chunk.
type deadlineWriter struct {
	w       http.ResponseWriter
	rc      http.ResponseController // a value: one allocation fewer
	timeout time.Duration
	armed   time.Time // when the deadline was last set; zero: never
}

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration) *deadlineWriter {
	return &deadlineWriter{w: w, rc: *http.NewResponseController(w), timeout: timeout}
}

// arm moves the deadline. A writer that cannot take one (a wrapper
// without Unwrap, http.ErrNotSupported) fails the write instead of
// writing unbounded: a silent miss here is a lease a stalled client holds
// for ever.
func (d *deadlineWriter) arm() error {
	now := time.Now()
	if !d.armed.IsZero() && now.Sub(d.armed) < d.timeout/16 {
		return nil
	}
	if err := d.rc.SetWriteDeadline(now.Add(d.timeout)); err != nil {
		return fmt.Errorf("gateway: write deadline: %w", err)
	}
	d.armed = now
	return nil
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if err := d.arm(); err != nil {
		return 0, err
	}
	return d.w.Write(p)
}

// wholePiece is how much of a whole answer writeWhole hands the
// connection per write.
const wholePiece = 64 << 10

// writeWhole writes a whole answer (up to maxHeldBody or
// openaiapi.MaxAnswerBytes) in pieces, each under the write deadline
// arm moves: a client that keeps reading gets it however slowly it
// reads, and one that stops is cut off after the write timeout. As one
// Write, the whole answer would have to leave within a single timeout
// (16 MiB in 30 s: a client slower than 4.5 Mbit/s cut off mid-body).
func (d *deadlineWriter) writeWhole(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), wholePiece)
		if _, err := d.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

func (d *deadlineWriter) Flush() error {
	if err := d.arm(); err != nil {
		return err
	}
	return d.rc.Flush()
}
