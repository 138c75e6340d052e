package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

const (
	stdoutReadSize = 32 << 10
	stderrReadSize = 8 << 10
	// pipeDrainGrace bounds how long, after the CLI's process group is
	// gone, we wait for EOF on its output pipes, not counting time spent
	// in the sink. Only a process that left the group (setsid) can still
	// hold them.
	pipeDrainGrace = 2 * time.Second
	// defaultPipeCapacity is what a pipe is assumed to hold when it cannot
	// be asked: Linux's default fs.pipe-max-size, the most an unprivileged
	// process can grow one to (other systems' pipes hold less).
	defaultPipeCapacity = 1 << 20
	// minWaitDelay bounds the stdin copy when the CLI exits without reading
	// its prompt while a descendant keeps stdin open.
	minWaitDelay = time.Second
)

// procSpec is everything one CLI process run needs.
type procSpec struct {
	path      string   // resolved program
	argv      []string // argv[0] as configured
	dir       string   // real path of the workspace
	env       []string // complete child environment; never nil
	stdin     string   // the prompt
	timeout   time.Duration
	killGrace time.Duration
	maxStderr int
	// Session id capture; nil re disables it.
	captureRe     *regexp.Regexp
	captureStderr bool
	// Closed by TerminateSession; nil for runs without a session.
	terminate <-chan struct{}
}

// procOutcome is what a finished process run observed.
type procOutcome struct {
	pid        int
	exitCode   int    // -1 when not known
	upstreamID string // captured session id, "" if none
	// Why the CLI's group ran without a guard (startGuard); nil when it
	// had one or the system has none.
	guardErr error
}

type stopReason int

const (
	notStopped stopReason = iota
	stopCancelled
	stopTimedOut
	stopTerminated
	stopSinkFailed
)

// procGroup signals a started CLI's process group, and refuses to once the
// leader has been reaped (its id could then name an unrelated group).
type procGroup struct {
	proc   *os.Process
	mu     sync.Mutex
	reaped bool
}

func (g *procGroup) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reaped {
		return
	}
	if err := signalGroup(g.proc, sig); err != nil {
		// The unreaped leader keeps its group alive, so this should not
		// happen; still, never leave the leader itself running.
		_ = g.proc.Signal(sig)
	}
}

// runProcess runs the CLI to completion: the prompt goes to stdin, stdout is
// streamed to sink as it arrives, stderr is kept bounded for the error
// message. It returns only once the process has been reaped and both output
// readers have finished, so no goroutine outlives it.
//
// The process is stopped (SIGTERM to its group, SIGKILL after the grace) when
// ctx is done, the timeout elapses, spec.terminate is closed or sink fails.
func runProcess(ctx context.Context, spec *procSpec, sink adapter.RunSink) (procOutcome, error) {
	out := procOutcome{exitCode: -1}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("cli: run cancelled: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return out, internalErr("create stdout pipe", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return out, internalErr("create stderr pipe", err)
	}
	cmd := &exec.Cmd{
		Path:        spec.path,
		Args:        spec.argv,
		Dir:         spec.dir,
		Env:         spec.env,
		Stdin:       strings.NewReader(spec.stdin),
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: groupAttr(),
		WaitDelay:   max(spec.killGrace, minWaitDelay),
	}
	var (
		g        *procGroup
		guard    *groupGuard
		guardErr error
		waitErr  error
	)
	started := make(chan error, 1)
	exited := make(chan struct{})
	// Owner: runProcess, which receives from started and, once the CLI has
	// started, from exited before returning. Stops at once if the CLI
	// cannot be started, else once it has exited and been reaped (and its
	// guard with it); cmd.Wait itself is bounded by WaitDelay for the
	// stdin copy.
	go func() {
		// Locked until the CLI is reaped: its parent-death signal follows
		// the thread that started it (parentDeathAttr). Unlocked, the
		// thread goes back to the runtime, which keeps it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		g = &procGroup{proc: cmd.Process}
		// Started before the leader can be reaped: its group still exists.
		guard, guardErr = startGuard(cmd.Process.Pid)
		started <- nil
		defer close(exited)
		swept := waitExited(cmd.Process.Pid) == nil
		if swept {
			// Sweep whatever the leader left behind in its group while
			// the zombie still pins the group id.
			g.signal(syscall.SIGKILL)
		}
		// Reaped before the leader: once the leader is reaped, what
		// waited for it (a process that left the group) may write, and
		// the drain's bound counts from exited.
		guard.stop()
		g.mu.Lock()
		g.reaped = true
		g.mu.Unlock()
		waitErr = cmd.Wait()
		if swept {
			// Owner: the swept group. Stops once no child of the Node is
			// left in it: the members killed above die promptly. Not
			// waited for, so that the run's end does not depend on a
			// dying process.
			go reapGroup(cmd.Process.Pid)
		}
	}()
	startErr := <-started
	// The child holds its own copies of the write ends; ours would keep the
	// readers from ever seeing EOF.
	outW.Close()
	errW.Close()
	if startErr != nil {
		outR.Close()
		errR.Close()
		return out, &adapter.Error{Code: adapter.CodeUpstream, Message: "cli command could not be started", Err: startErr}
	}
	out.pid = cmd.Process.Pid
	out.guardErr = guardErr

	chunks := make(chan []byte)
	// Owner: runProcess, which drains chunks until it is closed. Stops at EOF
	// (every holder of the write end is gone) or at a read error (runProcess
	// closed outR after the drain grace).
	go func() {
		defer close(chunks)
		buf := make([]byte, stdoutReadSize)
		for {
			n, err := outR.Read(buf)
			if n > 0 {
				chunks <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()

	stderrTail := newTailBuffer(spec.maxStderr)
	var stderrCap *capture
	if spec.captureRe != nil && spec.captureStderr {
		stderrCap = newCapture()
	}
	stderrDone := make(chan struct{})
	// Owner: runProcess, which receives from stderrDone before returning.
	// Stops at EOF or at a read error, like the stdout reader.
	go func() {
		defer close(stderrDone)
		buf := make([]byte, stderrReadSize)
		for {
			n, err := errR.Read(buf)
			if n > 0 {
				stderrTail.Write(buf[:n])
				if stderrCap != nil {
					stderrCap.Write(buf[:n])
				}
			}
			if err != nil {
				return
			}
		}
	}()

	var stdoutCap *capture
	if spec.captureRe != nil && !spec.captureStderr {
		stdoutCap = newCapture()
	}
	var (
		reason    stopReason
		sinkErr   error
		chunker   utf8Chunker
		done      = ctx.Done()
		terminate = spec.terminate
		timeoutC  <-chan time.Time
		graceC    <-chan time.Time
		drainC    <-chan time.Time
		pipesOpen = true
		exitedC   = exited
		chunksC   = chunks
		stderrC   = stderrDone
		// Set once the CLI has exited on its own: stdout is read only
		// for what its group left in the pipe, at most drainLeft more
		// bytes, until drainEnd (pushed back by the time spent in the
		// sink meanwhile).
		draining  bool
		drainLeft int
		drainEnd  time.Time
	)
	var timers []*time.Timer
	closePipes := func() {
		if pipesOpen {
			pipesOpen = false
			// Unblocks the readers' pending Read calls.
			outR.Close()
			errR.Close()
		}
	}
	defer closePipes()
	newTimer := func(d time.Duration) <-chan time.Time {
		t := time.NewTimer(d)
		// Stopped on return so that no timer outlives the run.
		timers = append(timers, t)
		return t.C
	}
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	if spec.timeout > 0 {
		timeoutC = newTimer(spec.timeout)
	}
	stop := func(r stopReason) {
		if reason != notStopped {
			return
		}
		reason = r
		done, terminate, timeoutC = nil, nil, nil
		if exitedC == nil {
			// The group is already gone; only output we no longer want
			// can still arrive.
			closePipes()
			return
		}
		if spec.killGrace > 0 {
			g.signal(syscall.SIGTERM)
			graceC = newTimer(spec.killGrace)
		} else {
			g.signal(syscall.SIGKILL)
		}
	}
	emit := func(text string) {
		if text == "" || reason != notStopped {
			return
		}
		start := time.Now()
		err := sink.Delta(text)
		if draining {
			drainEnd = drainEnd.Add(time.Since(start))
		}
		if err != nil {
			sinkErr = err
			stop(stopSinkFailed)
		}
	}

	for exitedC != nil || chunksC != nil || stderrC != nil {
		select {
		case c, ok := <-chunksC:
			if !ok {
				chunksC = nil
				emit(chunker.flush())
				continue
			}
			if draining {
				if len(c) > drainLeft {
					// More than the group can have left in the pipe:
					// the rest is written by a process that left the
					// group, and would keep the run open for as long
					// as it writes.
					c = c[:drainLeft]
					drainC = nil
					closePipes()
				}
				drainLeft -= len(c)
			}
			if stdoutCap != nil {
				stdoutCap.Write(c)
			}
			emit(chunker.next(c))
		case <-stderrC:
			stderrC = nil
		case <-exitedC:
			exitedC = nil
			graceC = nil
			if reason != notStopped {
				closePipes()
			} else {
				// The group was killed as the CLI exited: what is still
				// in the pipe, and a chunk in flight on either side of
				// it, is all the CLI's output that can still come.
				draining = true
				drainLeft = pipeCapacity(outR) + 2*stdoutReadSize
				drainEnd = time.Now().Add(pipeDrainGrace)
				drainC = newTimer(pipeDrainGrace)
			}
		case <-drainC:
			// Re-arm by the time the sink took meanwhile (a slow sink made
			// us fall behind); give up once the grace is spent otherwise,
			// whether or not output still trickles in.
			if left := time.Until(drainEnd); left > 0 {
				drainC = newTimer(left)
			} else {
				drainC = nil
				closePipes()
			}
		case <-done:
			stop(stopCancelled)
		case <-timeoutC:
			stop(stopTimedOut)
		case <-terminate:
			stop(stopTerminated)
		case <-graceC:
			graceC = nil
			g.signal(syscall.SIGKILL)
		}
	}

	// ErrWaitDelay comes only after a successful exit (the stdin copy
	// outlived the wait delay: a descendant held the prompt unread, or the
	// copy was not scheduled in time on a loaded node), so it is exit 0.
	if ee, ok := errors.AsType[*exec.ExitError](waitErr); ok {
		out.exitCode = ee.ExitCode()
	} else if waitErr == nil || errors.Is(waitErr, exec.ErrWaitDelay) {
		out.exitCode = 0
	}
	switch reason {
	case stopSinkFailed:
		return out, fmt.Errorf("cli: send delta: %w", sinkErr)
	case stopCancelled:
		return out, fmt.Errorf("cli: run cancelled: %w", ctx.Err())
	case stopTimedOut:
		return out, &adapter.Error{Code: adapter.CodeTimeout, Message: fmt.Sprintf("cli run timed out after %s", spec.timeout)}
	case stopTerminated:
		return out, &adapter.Error{Code: adapter.CodeUpstream, Message: "cli session was terminated"}
	}
	if err := exitError(waitErr, stderrTail.text()); err != nil {
		return out, err
	}
	if spec.captureRe != nil {
		if stderrCap != nil {
			out.upstreamID = stderrCap.find(spec.captureRe)
		} else {
			out.upstreamID = stdoutCap.find(spec.captureRe)
		}
	}
	return out, nil
}

// exitError classifies how cmd.Wait ended; nil means success.
func exitError(waitErr error, stderrTail string) error {
	if waitErr == nil || errors.Is(waitErr, exec.ErrWaitDelay) {
		// ErrWaitDelay: the CLI exited 0 but a descendant held stdin
		// open; its answer is complete.
		return nil
	}
	ee, ok := errors.AsType[*exec.ExitError](waitErr)
	if !ok {
		return &adapter.Error{Code: adapter.CodeInternal, Message: "cli: waiting for the command failed", Err: waitErr}
	}
	var msg string
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		msg = fmt.Sprintf("cli was killed by signal %s", ws.Signal())
	} else {
		msg = fmt.Sprintf("cli exited with status %d", ee.ExitCode())
	}
	if stderrTail != "" {
		msg += ": " + stderrTail
	}
	return &adapter.Error{Code: adapter.CodeUpstream, Message: msg, Err: waitErr}
}
