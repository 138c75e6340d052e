//go:build unix

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testwait"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// waitLong bounds every wait in these tests; generous so that a loaded CI
// machine does not flake, while a hang still fails.
const waitLong = 10 * time.Second

// rig is a Node environment in temporary directories.
type rig struct {
	root  string // workspace root (not yet created)
	store string
	env   adapter.Env
}

func newRig(t *testing.T) *rig {
	t.Helper()
	base := t.TempDir()
	r := &rig{root: filepath.Join(base, "ws"), store: filepath.Join(base, "store")}
	r.env = adapter.Env{StoreDir: r.store, WorkspaceRoot: r.root}
	return r
}

// realRoot is the workspace root's real path (created if needed).
func (r *rig) realRoot(t *testing.T) string {
	t.Helper()
	if err := os.MkdirAll(r.root, 0o750); err != nil {
		t.Fatal(err)
	}
	p, err := filepath.EvalSymlinks(r.root)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *rig) instance(t *testing.T, command []string, settings map[string]string) *instance {
	t.Helper()
	return r.instanceCfg(t, &iop.AdapterConfig{Name: "agent", Type: Type, Command: command, Settings: settings})
}

func (r *rig) instanceCfg(t *testing.T, cfg *iop.AdapterConfig) *instance {
	t.Helper()
	inst, err := New(cfg, r.env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return inst.(*instance)
}

// script writes an executable /bin/sh script with body and returns its path.
// All scripts are written before anything is started from them, so no
// concurrent fork can hold the file open for writing (ETXTBSY).
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// sq quotes s for a shell script.
func sq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func chatJSON(t *testing.T, msgs ...string) *iop.RunInput {
	t.Helper()
	if len(msgs)%2 != 0 {
		t.Fatal("chatJSON wants role, content pairs")
	}
	roles := map[string]iop.ChatRole{"system": iop.ChatRole_CHAT_ROLE_SYSTEM, "user": iop.ChatRole_CHAT_ROLE_USER, "assistant": iop.ChatRole_CHAT_ROLE_ASSISTANT, "tool": iop.ChatRole_CHAT_ROLE_TOOL}
	in := &iop.RunInput{}
	for i := 0; i < len(msgs); i += 2 {
		in.Messages = append(in.Messages, &iop.ChatMessage{Role: roles[msgs[i]], Content: []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: msgs[i+1]}}}})
	}
	return in
}

func userRun(t *testing.T, text string) *iop.RunRequest {
	return &iop.RunRequest{RunId: "run-1", Operation: adapter.OpChat, Input: chatJSON(t, "user", text)}
}

// chanSink hands every delta to the test through a buffered channel.
type chanSink struct{ ch chan string }

func newChanSink() *chanSink { return &chanSink{ch: make(chan string, 4096)} }

func (s *chanSink) Delta(text string) error {
	s.ch <- text
	return nil
}

// rest concatenates the deltas not yet received; call after Run returned.
func (s *chanSink) rest() string {
	var b strings.Builder
	for {
		select {
		case d := <-s.ch:
			b.WriteString(d)
		default:
			return b.String()
		}
	}
}

// drain returns the deltas not yet received, one by one.
func drain(s *chanSink) []string {
	var out []string
	for {
		select {
		case d := <-s.ch:
			out = append(out, d)
		default:
			return out
		}
	}
}

// failingSink fails every delta, like a stream whose caller went away.
type failingSink struct{ err error }

func (s failingSink) Delta(string) error { return s.err }

type outcome struct {
	res *adapter.Result
	err error
}

// runAsync runs inst.Run in a goroutine and reports on the returned channel.
func runAsync(ctx context.Context, inst *instance, req *iop.RunRequest, sink adapter.RunSink) <-chan outcome {
	ch := make(chan outcome, 1)
	// Owner: the calling test, which receives from ch (await) before it
	// ends. Stops when Run returns; ch is buffered so it never blocks.
	go func() {
		res, err := inst.Run(ctx, req, sink)
		ch <- outcome{res, err}
	}()
	return ch
}

// await is the outcome of a run started by runAsync, within waitLong.
func await(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	return testwait.Recv(t, ch, waitLong, "the run to return")
}

// recvDelta is the next delta written to s, within waitLong.
func recvDelta(t *testing.T, s *chanSink) string {
	t.Helper()
	return testwait.Recv(t, s.ch, waitLong, "a delta")
}

// runSync runs to completion and returns the whole output.
func runSync(t *testing.T, inst *instance, req *iop.RunRequest) (string, error) {
	t.Helper()
	s := newChanSink()
	o := await(t, runAsync(context.Background(), inst, req, s))
	if o.err == nil && (o.res == nil || o.res.FinishReason != "stop") {
		t.Fatalf("result = %+v, want finish reason stop", o.res)
	}
	return s.rest(), o.err
}

// processGone reports whether pid has exited. A zombie counts as gone: in a
// container the init process may never reap reparented orphans.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// eventually polls cond (every 20 ms: it may read /proc) until it holds
// or waitLong passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, waitLong, 20*time.Millisecond, what, cond)
}

// readPID waits for a script to write a pid into file.
func readPID(t *testing.T, file string) int {
	t.Helper()
	var pid int
	eventually(t, "pid file "+file, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		_, err = fmt.Sscanf(string(b), "%d", &pid)
		return err == nil && pid > 0
	})
	return pid
}
