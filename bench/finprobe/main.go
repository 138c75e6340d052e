//go:build unix

// Command finprobe measures whether a reader can skip the read that finds
// a socket empty (EAGAIN) before it parks, the one system call per
// streamed chunk the node pays beyond a bare relay's.
//
// Each trial connects to a loopback server that, after a pause, writes a
// final SSE event and closes at once, as an upstream does when it dies
// mid-stream. The client reads inside one syscall.RawConn.Read (so the
// descriptor's readiness is never reset between reads) and, after a read
// that came back short, waits for the next wake-up instead of reading
// again. A wake-up for new bytes always comes (every arrival raises a new
// edge); the question is whether one comes for the FIN when it arrived
// with the last bytes. The control trial reads until EAGAIN, as Go's
// net.Conn does.
//
//	go run ./bench/finprobe            # 50 trials of each
//	go run ./bench/finprobe -trials 200
//
// A trial that is not woken gives up after -wait (the reader would
// otherwise wait for its request's deadline).
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

func main() {
	trials := flag.Int("trials", 50, "trials per mode")
	wait := flag.Duration("wait", 300*time.Millisecond, "how long a reader waits for the FIN's wake-up before the trial counts as missed")
	flag.Parse()
	if *trials <= 0 || *wait <= 0 {
		fmt.Fprintln(os.Stderr, "finprobe: -trials and -wait must be positive")
		os.Exit(2)
	}
	for _, skip := range []bool{false, true} {
		missed, failed := 0, 0
		for i := 0; i < *trials; i++ {
			ok, err := trial(skip, *wait)
			switch {
			case err != nil:
				failed++
				fmt.Fprintf(os.Stderr, "finprobe: trial: %v\n", err)
			case !ok:
				missed++
			}
		}
		mode := "read until EAGAIN (net.Conn)"
		if skip {
			mode = "wait after a short read"
		}
		fmt.Printf("%-30s FIN not seen within %v: %d of %d trials (%d failed to run)\n", mode, *wait, missed, *trials, failed)
	}
}

// trial reports whether the reader saw the peer's FIN (read 0) before
// its deadline.
func trial(skipEAGAIN bool, wait time.Duration) (bool, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	// Owner: this trial; ends after one accept (or when ln closes).
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		// Long enough for the client to have found the socket empty and
		// parked: the last bytes and the FIN then arrive while it waits.
		time.Sleep(20 * time.Millisecond)
		_, _ = s.Write([]byte("data: {\"choices\":[]}\n\n"))
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return false, fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return false, fmt.Errorf("syscall conn: %w", err)
	}
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return false, fmt.Errorf("deadline: %w", err)
	}
	buf := make([]byte, 4096)
	sawEOF := false
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN):
				return false
			case err != nil:
				rerr = err
				return true
			case n == 0:
				sawEOF = true
				return true
			case skipEAGAIN && n < len(buf):
				// Short: the socket was drained; wait for the next edge.
				return false
			}
		}
	})
	if rerr != nil {
		return false, fmt.Errorf("read: %w", rerr)
	}
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return false, fmt.Errorf("raw read: %w", err)
	}
	return sawEOF, nil
}
