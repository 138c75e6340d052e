//go:build unix

package testproc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// HoldStart makes fifo a FIFO (skipping the test where that is not
// possible), starts cmd, which reads fifo as it starts, and returns once
// cmd has opened it: the command is then mid-start-up. w feeds the FIFO
// (the caller closes it); done receives cmd.Wait's result. A command that
// exits, or does not open the FIFO within 30 s, fails the test; one still
// running when the test ends is killed.
func HoldStart(t testing.TB, cmd *exec.Cmd, fifo string) (w *os.File, done <-chan error) {
	t.Helper()
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	// Owner: the test; ends when the process exits (killed at cleanup at
	// the latest).
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// A FIFO opened for writing without blocking fails (ENXIO) until a
	// reader has it open: polled, so that a command that dies before it
	// opens the file fails the test instead of hanging it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			return f, exited
		}
		if !errors.Is(err, syscall.ENXIO) {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			t.Fatalf("exited before opening %s: %v", fifo, err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not opened within 30 s", fifo)
		}
	}
}
