package nodewire

import "time"

// streamDeadline is one direction's deadline on a stream, kept the way the
// net package's poller keeps a socket's: setting it arms a timer that marks
// it expired and wakes the waiter, so that a wait itself touches no timer.
// An edge waits once for every streamed chunk it relays, under a deadline
// that moves a few times a second (dispatch's idle timeout with slack); a
// timer reset and stop per wait cost a fifth of a blocked Recv.
//
// All fields are guarded by the stream's mu.
type streamDeadline struct {
	at      time.Time // zero: none
	expired bool      // at has passed: waits in this direction fail with errTimeout
	// timer runs expire; nil until a deadline is set ahead, and again once
	// the direction is off or a cleared write deadline dropped it
	// (dropLocked): a held stream keeps none for a direction it no longer
	// bounds (~140 bytes each: the timer and its closure).
	timer *time.Timer
	// off: the direction can no longer wait (the stream failed or was
	// closed that way); no timer is armed again, so a finished stream is
	// not kept alive by a deadline minutes away.
	off bool
}

// setLocked makes t the deadline (zero clears it) and reports whether it
// has already passed, so the caller wakes a waiter to see it. expire is
// the stream's callback for this direction, run on st by the timer, which
// is made the first time a deadline is set ahead.
func (d *streamDeadline) setLocked(t time.Time, st *muxStream, expire func(*muxStream)) (passed bool) {
	d.at, d.expired = t, false
	var wait time.Duration
	if !t.IsZero() {
		wait = time.Until(t)
		d.expired = wait <= 0
	}
	if t.IsZero() || d.expired || d.off {
		if d.timer != nil {
			d.timer.Stop()
		}
		return d.expired
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, func() { expire(st) })
	} else {
		d.timer.Reset(wait)
	}
	return false
}

// fireLocked is the timer's work: it marks the deadline expired when it has
// passed and reports whether it did, so the caller wakes the waiter. A
// timer that fires for a deadline since cleared does nothing; one that
// fires before the deadline (moved later while the timer ran, or a
// deadline without a monotonic reading across a clock step) is re-armed
// for what is left.
func (d *streamDeadline) fireLocked() bool {
	if d.at.IsZero() || d.expired || d.off {
		return false
	}
	if left := time.Until(d.at); left > 0 {
		d.timer.Reset(left)
		return false
	}
	d.expired = true
	return true
}

// offLocked disarms the timer for good once its direction can no longer
// wait.
func (d *streamDeadline) offLocked() {
	d.off = true
	d.dropLocked()
}

// dropLocked stops the timer and lets go of it. A callback already running
// finds no deadline, or a later one that another timer is armed for
// (fireLocked), so the stale timer does nothing; a deadline set ahead
// later makes a new one.
func (d *streamDeadline) dropLocked() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}
