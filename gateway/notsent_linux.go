package gateway

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// clientNotSentLowat bounds the bytes a client connection's socket holds
// not yet sent (TCP_NOTSENT_LOWAT). Without it the send buffer autotunes
// up to net.ipv4.tcp_wmem's maximum (4 MiB by default) and a writer
// blocked on a full buffer is woken only once a third of it has drained:
// a per-write deadline then measures how long the client takes to read
// ~1.3 MiB, and a client reading steadily below ~1.3 MiB per write timeout
// (47 KiB/s at 30 s) was cut off as if it had stopped. With the bound the
// writer is woken each time half of it has gone, so the deadline fails
// only a client that reads under 64 KiB in a write timeout. The socket
// still sends as fast as the path allows: the bound is on what waits in
// the kernel, not on what is in flight.
const clientNotSentLowat = 128 << 10

// boundUnsent sets clientNotSentLowat on c. A connection that is not TCP
// (a test's pipe) or a kernel without the option keeps its default: the
// write deadline still bounds a client that stops reading.
func boundUnsent(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, clientNotSentLowat)
	})
}
