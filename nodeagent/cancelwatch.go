package nodeagent

import (
	"context"
	"sync"
	"time"

	"github.com/iop-gateway/iop/nodewire"
)

// cancelWatch cancels a run when the Edge asks (a CancelRequest on the
// exchange's stream) or gives up (its side of the stream ending before our
// terminal message). A quiet stream costs it no goroutine: the stream
// starts one when a frame or the stream's end arrives (AfterReadable),
// which reads what is there and re-arms. Held streams are the common case
// (a node holds one per streamed generation), so this is a goroutine
// stack less per stream.
type cancelWatch struct {
	st     *nodewire.Stream
	cancel context.CancelCauseFunc // called with nil: the cause is context.Canceled

	mu      sync.Mutex
	stopped bool // guarded by mu: stop has begun; no reader re-arms
	ended   bool // guarded by mu: Recv failed (EOF, reset, connection)
	// exited is closed by the reader that ends the chain of readers (it
	// saw the end of the stream or stop); stop waits on it only when a
	// reader was started.
	exited chan struct{} // closed under mu
}

// Test seams, nil in production: the order of a reader and stop that race
// for the same frame cannot be forced from outside. afterRecvHook runs in a
// reader after each Recv; stopWaitsHook runs in stop just before it waits
// for a started reader to exit; drainHook runs in stop after each frame it
// drains (a node slower than the Edge's sends).
var afterRecvHook, stopWaitsHook, drainHook func()

// watchCancel starts watching st for the run whose context cancel ends.
func watchCancel(st *nodewire.Stream, cancel context.CancelCauseFunc) *cancelWatch {
	w := &cancelWatch{st: st, cancel: cancel, exited: make(chan struct{})}
	if !st.AfterReadable(w.read) {
		// Owner: the watch (stop waits for it). Stops at the stream's end
		// or when it sees stop; otherwise it re-arms and returns.
		go w.read()
	}
	return w
}

// read runs in the goroutine AfterReadable starts: it reads the frames
// that arrived, then re-arms, or exits for good at the stream's end or
// once stop has begun.
func (w *cancelWatch) read() {
	for {
		env, err := w.st.Recv()
		if afterRecvHook != nil {
			afterRecvHook()
		}
		w.mu.Lock()
		if err != nil {
			w.ended = true
			if !w.stopped {
				w.cancel(nil) // the Edge gave up before our terminal message
			}
			close(w.exited)
			w.mu.Unlock()
			return
		}
		if env.GetCancelRequest() != nil {
			w.cancel(nil)
		}
		if w.stopped {
			close(w.exited)
			w.mu.Unlock()
			return
		}
		armed := w.st.AfterReadable(w.read)
		w.mu.Unlock()
		if armed {
			return
		}
	}
}

// stop ends the watch after the run's terminal message: it half-closes
// the stream and waits, at most wait, for the Edge to close its side,
// reading (and ignoring) whatever it still sends.
func (w *cancelWatch) stop(wait time.Duration) {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	_ = w.st.CloseWrite()
	// The deadline also bounds a reader that is waiting for the rest of a
	// frame the Edge began and never finished.
	deadline := time.Now().Add(wait)
	_ = w.st.SetReadDeadline(deadline)
	if !w.st.StopWatch() {
		// A reader was started: it exits on seeing stopped, at the
		// stream's end, or at the deadline.
		if stopWaitsHook != nil {
			stopWaitsHook()
		}
		<-w.exited
	}
	w.mu.Lock()
	ended := w.ended
	w.mu.Unlock()
	if ended {
		return
	}
	// Recv hands over frames already buffered whatever the deadline: an
	// Edge that keeps sending on a finished exchange faster than this loop
	// reads would hold it, and the handler, for as long as it sends.
	for time.Now().Before(deadline) {
		if _, err := w.st.Recv(); err != nil {
			return
		}
		if drainHook != nil {
			drainHook()
		}
	}
}
