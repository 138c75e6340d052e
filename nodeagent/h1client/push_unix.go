//go:build unix

package h1client

import (
	"errors"
	"os"
	"syscall"
	"time"
)

const pushSupported = true

// readLoop reads the socket inside syscall.RawConn.Read, which resets the
// descriptor's readiness once, on entry: from then on every arrival of
// bytes raises a new wake-up, so after a read that came back short (the
// socket is empty) the callback can park at once. Not so for a FIN that
// came with the bytes just read (see DefaultStreamCheckInterval): such a
// park arms the read deadline, which brings the loop back for one more
// read after checkEvery. A read that finds the socket empty (EAGAIN) also
// proves no FIN is pending, so a park after it needs no deadline: a quiet
// stream is checked once after its last bytes, not once per interval. A
// close-delimited body ends only with the FIN, so it is read until EAGAIN
// as net.Conn does.
//
// An upstream may keep the socket full for good, so that no read comes
// back short: the callback then returns after maxReadsPerWake reads, and
// the next raw.Read, which checks the deadline an interrupt set and the
// descriptor's closing, is what ends the push on a cancel or a Close
// (the cancellation is also looked at directly on each such yield).
func (ps *pusher) readLoop() error {
	c := ps.b.c
	every := ps.b.t.streamCheck
	// The callback's results; one closure serves every raw.Read of the
	// push (a closure per call would be an allocation per wake-up).
	var (
		ferr    error
		yielded bool
		armed   bool
	)
	read := func(fd uintptr) bool {
		bp := pushBufs.Get().(*[]byte)
		defer pushBufs.Put(bp)
		buf := *bp
		for reads := 1; ; reads++ {
			n, err := syscall.Read(int(fd), buf)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN):
				return false
			case err != nil:
				ferr = os.NewSyscallError("read", err)
				return true
			case n == 0:
				ferr = ps.eof()
				return true
			}
			if ferr = ps.feed(buf[:n]); ferr != nil || ps.ended {
				return true
			}
			if n < len(buf) && ps.d.kind != framingClose {
				if !armed {
					if !c.armRead(time.Now().Add(every)) {
						ferr = errInterrupted
						return true
					}
					armed = true
				}
				return false
			}
			if reads == maxReadsPerWake {
				yielded = true
				return true
			}
		}
	}
	for {
		ferr, yielded = nil, false
		err := c.raw.Read(read)
		switch {
		case ferr != nil || ps.ended:
			return ferr
		case err == nil && yielded:
			// The socket stays full. The interrupt's deadline that raw.Read
			// checks is set by a hook on a goroutine of its own, which a
			// busy machine may run late while reads go on at memory speed:
			// look at the cancellation itself too (once per yield, never
			// per chunk). WriteTo reports the context's error.
			if ps.b.ctx.Err() != nil {
				return errInterrupted
			}
			continue
		case err == nil:
			// The callback only stops on an end or an error, both above.
			return errors.New("h1client: push stopped without an end")
		case errors.Is(err, os.ErrDeadlineExceeded) && !c.isInterrupted():
			// The check: clear the deadline and read once more.
			c.disarmRead()
			armed = false
			continue
		}
		return err
	}
}
