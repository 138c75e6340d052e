// Package sockopt sets the socket options the standard library leaves
// alone.
package sockopt

import "syscall"

// rawConn reaches the socket under a connection, through any wrapper that
// embeds a *net.TCPConn (the edge's listeners hand out such wrappers).
func rawConn(c any) (syscall.RawConn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	return raw, true
}
