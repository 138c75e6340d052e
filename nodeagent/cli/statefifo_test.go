//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// statefifoDir creates session sid's directory (not its state file).
func statefifoDir(t *testing.T, inst *instance, sid string) string {
	t.Helper()
	dir := filepath.Join(inst.sessionsDir(), sessionDirName(sid))
	if err := os.MkdirAll(dir, stateDirPerm); err != nil {
		t.Fatal(err)
	}
	return dir
}

// statefifoMake puts a FIFO at path.
func statefifoMake(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// statefifoRelease opens the FIFO at path for writing without blocking,
// which lets a reader blocked in opening it go on (to a read that sees
// the end at once when the writer closes).
func statefifoRelease(path string) {
	if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}

// statefifoReleaseUntil releases the FIFOs given until done is closed:
// a release reaches only a reader already blocked in opening, and f may
// open several in turn. Only after a test has failed.
func statefifoReleaseUntil(done <-chan struct{}, fifos ...string) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, p := range fifos {
			statefifoRelease(p)
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// statefifoWithin runs f and fails the test if it has not returned within
// waitLong, first releasing the FIFOs given (so that a reader blocked on
// one does not outlive the test).
func statefifoWithin(t *testing.T, what string, f func(), fifos ...string) {
	t.Helper()
	done := make(chan struct{})
	// Owner: this test. Ends when f returns; f blocked in opening a FIFO
	// is released by statefifoRelease below.
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(waitLong):
		statefifoReleaseUntil(done, fifos...)
		t.Fatalf("%s did not return within %v (blocked opening a state file?)", what, waitLong)
	}
}

// A session directory whose state.json is no regular file of its own (a
// FIFO, a symlink to a FIFO or to a state file outside the store) or is
// larger than any state is unreadable: loading the store neither blocks on
// it nor reads what it points to. Each is warned of, not listed, counted
// against max_sessions and evicted before readable sessions; evicting a
// symlinked one removes the link, never what it points to.
func TestStateFileThatIsNoRegularFileIsUnreadable(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(5))
	ok := sessionState{ID: "ok", Runs: 1, CreatedUnix: 1, LastUsedUnix: 1}
	if err := writeState(filepath.Join(inst.sessionsDir(), sessionDirName("ok")), &ok); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(statefifoDir(t, inst, "fifo"), stateFileName)
	statefifoMake(t, fifo)

	outside := t.TempDir()
	outFIFO := filepath.Join(outside, "fifo")
	statefifoMake(t, outFIFO)
	if err := os.Symlink(outFIFO, filepath.Join(statefifoDir(t, inst, "tofifo"), stateFileName)); err != nil {
		t.Fatal(err)
	}
	// A state file outside the store, plausible for its id: read through
	// the link, it would make the session look established.
	outState := filepath.Join(outside, "state.json")
	b, err := json.Marshal(sessionState{ID: "linked", Runs: 7, CreatedUnix: 2, LastUsedUnix: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outState, b, stateFilePerm); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outState, filepath.Join(statefifoDir(t, inst, "linked"), stateFileName)); err != nil {
		t.Fatal(err)
	}
	// Valid JSON for its id, padded past any state's size.
	big, err := json.Marshal(sessionState{ID: "big", Runs: 1, CreatedUnix: 3, LastUsedUnix: 3})
	if err != nil {
		t.Fatal(err)
	}
	big = append(bytes.Repeat([]byte(" "), maxStateBytes), big...)
	if err := os.WriteFile(filepath.Join(statefifoDir(t, inst, "big"), stateFileName), big, stateFilePerm); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zap.WarnLevel)
	r.env.Logger = zap.New(core)
	fresh := r.instance(t, []string{script(t, argsScript)}, boundSettings(5))
	var listed []string
	statefifoWithin(t, "loading the sessions", func() { listed = listedSessions(fresh) }, fifo, outFIFO)
	if !slices.Equal(listed, []string{"ok"}) {
		t.Fatalf("listed %q, want [ok]", listed)
	}
	if n := logs.FilterMessage("cli: skip persisted session").Len(); n != 4 {
		t.Fatalf("%d warnings for the unreadable states, want 4", n)
	}
	// Five counted: each new session evicts an unreadable one first.
	for _, sid := range []string{"n1", "n2", "n3", "n4"} {
		if got := mustRun(t, fresh, sid); got != "args:new\nq" {
			t.Fatalf("run of %s = %q", sid, got)
		}
	}
	if got, want := storedSessions(t, fresh), []string{"n1", "n2", "n3", "n4", "ok"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q (the unreadable evicted first)", got, want)
	}
	for _, p := range []string{outFIFO, outState} {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("evicting a symlinked state removed its target %s: %v", p, err)
		}
	}
}

// A run of a session whose state.json is a FIFO does not block on it: it
// starts the session afresh, and its state written in the FIFO's place is
// the session's from then on.
func TestRunOfSessionWithFIFOStateStartsAfresh(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	fifo := filepath.Join(statefifoDir(t, inst, "piped"), stateFileName)
	statefifoMake(t, fifo)
	fresh := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	sink := newChanSink()
	ch := runAsync(context.Background(), fresh, sessionRun(t, "piped", "user", "q"), sink)
	var o outcome
	select {
	case o = <-ch:
	case <-time.After(waitLong):
		ran := make(chan struct{})
		// Owner: this test. Ends once the run has returned (the
		// releases let it go on).
		go func() { o = <-ch; close(ran) }()
		statefifoReleaseUntil(ran, fifo)
		t.Fatalf("a run of the session did not return within %v (blocked opening its state file?)", waitLong)
	}
	if got := sink.rest(); o.err != nil || got != "args:new\nq" {
		t.Fatalf("run = %q, %v; want a fresh session", got, o.err)
	}
	if got := mustRun(t, fresh, "piped"); !strings.HasPrefix(got, "args:resume") {
		t.Fatalf("second run = %q, want it to resume", got)
	}
	if fi, err := os.Lstat(fifo); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("state file after the run: %v, %v; want a regular file", fi, err)
	}
}

// readState tells a state file that is no regular file, or too large, by
// its sentinel, and reads one of exactly maxStateBytes.
func TestReadStateRefusalsAreTyped(t *testing.T) {
	base := t.TempDir()
	mk := func(name string) string {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, stateDirPerm); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	fifoDir := mk("fifo")
	fifo := filepath.Join(fifoDir, stateFileName)
	statefifoMake(t, fifo)
	var err error
	statefifoWithin(t, "reading a FIFO state", func() { _, err = readState(fifoDir, "fifo") }, fifo)
	if !errors.Is(err, errStateNotRegular) {
		t.Errorf("FIFO: err = %v, want errStateNotRegular", err)
	}
	linkDir := mk("link")
	if err := os.Symlink(os.DevNull, filepath.Join(linkDir, stateFileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := readState(linkDir, "link"); !errors.Is(err, errStateNotRegular) {
		t.Errorf("symlink: err = %v, want errStateNotRegular", err)
	}
	body, err := json.Marshal(sessionState{ID: "fits", Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	fits := append(bytes.Repeat([]byte(" "), maxStateBytes-len(body)), body...)
	fitsDir := mk("fits")
	if err := os.WriteFile(filepath.Join(fitsDir, stateFileName), fits, stateFilePerm); err != nil {
		t.Fatal(err)
	}
	if st, err := readState(fitsDir, "fits"); err != nil || st.Runs != 1 {
		t.Errorf("state of exactly %d bytes: %+v, %v", maxStateBytes, st, err)
	}
	overDir := mk("over")
	if err := os.WriteFile(filepath.Join(overDir, stateFileName), append([]byte(" "), fits...), stateFilePerm); err != nil {
		t.Fatal(err)
	}
	if _, err := readState(overDir, "fits"); !errors.Is(err, errStateTooLarge) {
		t.Errorf("state of %d bytes: err = %v, want errStateTooLarge", maxStateBytes+1, err)
	}
}
