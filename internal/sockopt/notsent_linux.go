package sockopt

import (
	"net"

	"golang.org/x/sys/unix"
)

// BoundUnsent sets TCP_NOTSENT_LOWAT on c's socket to n bytes. Without it
// the send buffer autotunes up to net.ipv4.tcp_wmem's maximum (4 MiB by
// default), and a writer blocked on a full buffer is woken only once about
// a third of it has drained: a per-write deadline then measures how long
// the peer takes to read ~1.3 MiB, not whether it reads. With the bound
// the writer is woken once fewer than n/2 bytes wait unsent; the socket
// still sends as fast as the path allows (the bound is on what
// waits unsent in the kernel, not on what is in flight). A connection
// that is not a socket (a test's pipe) or a kernel without the option is
// left as it is: the deadlines still bound a peer that stops reading.
func BoundUnsent(c net.Conn, n int) {
	raw, ok := rawConn(c)
	if !ok {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	})
}

// Unsent reads back c's TCP_NOTSENT_LOWAT (for tests and diagnostics):
// -1 when it cannot be read.
func Unsent(c net.Conn) int {
	raw, ok := rawConn(c)
	if !ok {
		return -1
	}
	v := -1
	_ = raw.Control(func(fd uintptr) {
		if got, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT); err == nil {
			v = got
		}
	})
	return v
}
