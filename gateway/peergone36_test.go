package gateway

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

// The errors a Windows socket write fails with when the client reset or
// aborted its connection: net.OpError over os.SyscallError("wsasend")
// over the WSA errno, as the Windows poller returns them. clientLeft on
// Windows (clientLeftOn with its errnos) counts them as the client
// leaving; this runs on every platform.
func TestWindowsResetErrnosAreClientLeft36(t *testing.T) {
	wsa := func(e syscall.Errno) error {
		return fmt.Errorf("gateway: write: %w", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("wsasend", e)})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{wsa(10054), true},  // WSAECONNRESET
		{wsa(10053), true},  // WSAECONNABORTED
		{wsa(10060), false}, // WSAETIMEDOUT: not the client leaving
		{wsa(syscall.EPIPE), true},
		{wsa(syscall.ECONNRESET), true},
		{os.ErrDeadlineExceeded, false},
		{fmt.Errorf("not an errno"), false},
	} {
		if got := clientLeftOn(c.err, windowsPeerGone); got != c.want {
			t.Errorf("on Windows, clientLeft(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	// This platform's own list: every entry is the client leaving, for a
	// write (clientLeft) and for a body's read (clientGone).
	for _, e := range peerGoneErrnos {
		if !clientLeft(wsa(e)) || !clientGone(wsa(e)) {
			t.Errorf("errno %d of the platform's list not counted as the client leaving", int(e))
		}
	}
}
