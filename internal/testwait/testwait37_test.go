package testwait

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangEnv has this test binary, started again by hung, run the waits
// that time out (TestHangs); they are skipped in an ordinary run.
const hangEnv = "TESTWAIT_HANG"

// hung runs TestHangs/name in a child test binary and returns its output
// and exit error: a failed test cannot be observed from inside its own
// process.
func hung(t *testing.T, name string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHangs$/^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), hangEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return out.String(), err
}

// TestHangs is the child's side of TestWaitsNameWhatHung: each wait
// times out. The Group case releases its group at cleanup and then checks
// that nothing of the wait is left running.
func TestHangs(t *testing.T) {
	if os.Getenv(hangEnv) != "1" {
		t.Skip("run by TestWaitsNameWhatHung in a child process")
	}
	never := make(chan int)
	t.Run("recv", func(t *testing.T) {
		Recv(t, never, 20*time.Millisecond, "the answer that never comes")
		t.Error("Recv returned after timing out")
	})
	t.Run("group", func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Add(1)
		release := make(chan struct{})
		// Owner: the test; stops at release (cleanup).
		go func() { defer wg.Done(); <-release }()
		t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last
		t.Cleanup(func() { close(release) })
		Group(t, &wg, 20*time.Millisecond, "the workers that never finish")
		t.Error("Group returned after timing out")
	})
	t.Run("until", func(t *testing.T) {
		Until(t, 20*time.Millisecond, 0, "the condition that never holds", func() bool { return false })
		t.Error("Until returned after timing out")
	})
}

// A wait that times out fails its test with a line that names what it
// waited for, at the caller's line (the waits are helpers), stops the
// test there, and leaves no goroutine of its own behind.
func TestWaitsNameWhatHung(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"recv", "timed out after 20ms waiting for the answer that never comes"},
		{"group", "timed out after 20ms waiting for the workers that never finish"},
		{"until", "timed out after 20ms waiting for the condition that never holds"},
	} {
		out, err := hung(t, c.name)
		if err == nil {
			t.Fatalf("%s: the child passed:\n%s", c.name, out)
		}
		line := ""
		for l := range strings.Lines(out) {
			if strings.Contains(l, c.want) {
				line = l
				break
			}
		}
		switch {
		case line == "":
			t.Errorf("%s: output lacks %q:\n%s", c.name, c.want, out)
		case !strings.Contains(line, "testwait37_test.go:"):
			t.Errorf("%s: the failure is not reported at the caller's line: %q", c.name, line)
		}
		if strings.Contains(out, "returned after timing out") {
			t.Errorf("%s: the wait did not stop the test:\n%s", c.name, out)
		}
		if strings.Contains(out, "unexpected goroutines") {
			t.Errorf("%s: the wait left a goroutine behind:\n%s", c.name, out)
		}
	}
}

// The waits return what came, and a closed channel or a finished group
// ends them at once.
func TestWaitsReturn(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, time.Minute, "a buffered value"); got != 7 {
		t.Fatalf("Recv = %d, want 7", got)
	}
	close(ch)
	if got := Recv(t, ch, time.Minute, "the close"); got != 0 {
		t.Fatalf("Recv on a closed channel = %d, want 0", got)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	// Owner: the test; ends at once.
	go wg.Done()
	Group(t, &wg, time.Minute, "a group that finishes")
	n := 0
	Until(t, time.Minute, time.Microsecond, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}
