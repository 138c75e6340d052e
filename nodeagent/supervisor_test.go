package nodeagent

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mockPayload(capacity int32) *iop.NodeConfigPayload {
	return &iop.NodeConfigPayload{
		Adapters:  []*iop.AdapterConfig{{Name: "m", Type: "mock", Category: "api", Capacity: capacity}},
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 1000},
	}
}

func newTestAgent(t *testing.T) *Agent {
	a := NewAgent(map[string]adapter.Factory{"mock": mock.New}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	return a
}

// attemptLog records supervisor attempts.
type attemptLog struct {
	mu     sync.Mutex
	states []string
	ch     chan string
}

func newAttemptLog() *attemptLog { return &attemptLog{ch: make(chan string, 1024)} }

func (l *attemptLog) note(state string, attempt int, err error) {
	l.mu.Lock()
	l.states = append(l.states, state)
	l.mu.Unlock()
	select {
	case l.ch <- state:
	default:
	}
}

func (l *attemptLog) count(state string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.states {
		if s == state {
			n++
		}
	}
	return n
}

func waitState(t *testing.T, l *attemptLog, want string) {
	t.Helper()
	for {
		select {
		case s := <-l.ch:
			if s == want {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q state", want)
		}
	}
}

func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func newSup(t *testing.T, addr string, maxAttempts int, log *attemptLog) *Supervisor {
	s := NewSupervisor(SupervisorConfig{
		Dial:   nodewire.DialConfig{Address: addr, HandshakeTimeout: 2 * time.Second},
		NodeID: "n1", Token: "tok",
		Interval: 10 * time.Millisecond, MaxAttempts: maxAttempts,
	}, newTestAgent(t), nil)
	s.onState = log.note
	return s
}

func TestSupervisorFiniteBudgetIsExact(t *testing.T) {
	for _, max := range []int{1, 3} {
		log := newAttemptLog()
		err := newSup(t, closedAddr(t), max, log).Run(context.Background())
		if !errors.Is(err, ErrAttemptsExhausted) {
			t.Fatalf("max=%d: err = %v, want ErrAttemptsExhausted", max, err)
		}
		if got := log.count("dialing"); got != max {
			t.Fatalf("max=%d: %d attempts, want exactly %d", max, got, max)
		}
	}
}

func TestSupervisorUnlimitedUntilShutdown(t *testing.T) {
	log := newAttemptLog()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- newSup(t, closedAddr(t), 0, log).Run(ctx) }()
	// max_attempts 0 means unlimited: more than 10 dial attempts (what a
	// default budget of 10 would allow) are observed.
	for log.count("dialing") <= 12 {
		select {
		case <-log.ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("supervisor stopped retrying after %d attempts", log.count("dialing"))
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after shutdown = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after shutdown")
	}
}

func TestSupervisorCredentialRejectionIsFatal(t *testing.T) {
	for _, code := range []iop.RejectCode{iop.RejectCode_REJECT_CODE_CREDENTIALS, iop.RejectCode_REJECT_CODE_UNKNOWN_NODE, iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION} {
		fe := startFakeEdge(t, mockPayload(1), func(int) iop.RejectCode { return code })
		log := newAttemptLog()
		err := newSup(t, fe.addr, 0, log).Run(context.Background())
		if !errors.Is(err, ErrFatal) {
			t.Fatalf("%s: err = %v, want ErrFatal", code, err)
		}
		if got := log.count("dialing"); got != 1 {
			t.Fatalf("%s: %d attempts, want 1 (no retry)", code, got)
		}
	}
}

func TestSupervisorRetryableRejectionCountsAsAttempt(t *testing.T) {
	fe := startFakeEdge(t, mockPayload(1), func(int) iop.RejectCode { return iop.RejectCode_REJECT_CODE_UNAVAILABLE })
	log := newAttemptLog()
	err := newSup(t, fe.addr, 2, log).Run(context.Background())
	if !errors.Is(err, ErrAttemptsExhausted) || fe.registrations() != 2 {
		t.Fatalf("err = %v after %d registrations, want exhaustion after 2", err, fe.registrations())
	}
}

// The attempt count resets only after ready: alternating ready sessions and
// single failures never exhaust a budget of 2, while two failures in a row do.
func TestSupervisorAttemptCountResetsAfterReady(t *testing.T) {
	// registrations: 0 ok, 1 fail, 2 ok, 3 fail, 4 ok, 5 fail, 6 fail
	fe := startFakeEdge(t, mockPayload(1), func(n int) iop.RejectCode {
		if n%2 == 1 || n == 6 {
			return iop.RejectCode_REJECT_CODE_UNAVAILABLE
		}
		return iop.RejectCode_REJECT_CODE_UNSPECIFIED
	})
	log := newAttemptLog()
	done := make(chan error, 1)
	go func() { done <- newSup(t, fe.addr, 2, log).Run(context.Background()) }()
	for i := 0; i < 3; i++ {
		c := fe.nextReady(t)
		waitState(t, log, "ready") // the node has its ready answer
		_ = c.Close()              // the session is lost: the node reconnects
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrAttemptsExhausted) {
			t.Fatalf("err = %v, want exhaustion", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("supervisor did not give up after two consecutive failures")
	}
	if got := fe.registrations(); got != 7 {
		t.Fatalf("%d registrations, want 7 (the budget reset after each ready)", got)
	}
	if got := log.count("ready"); got != 3 {
		t.Fatalf("%d ready sessions, want 3", got)
	}
}

// Process start never waits for the edge: the supervisor keeps trying and
// connects as soon as the edge appears.
func TestSupervisorConnectsWhenEdgeAppearsLater(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	log := newAttemptLog()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- newSup(t, addr, 0, log).Run(ctx) }()
	<-log.ch // at least one attempt failed already
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("could not re-listen on %s: %v", addr, err)
	}
	fe := &fakeEdge{addr: addr, payload: mockPayload(1), script: func(int) iop.RejectCode { return 0 },
		conns: make(chan *nodewire.Conn, 8), ready: map[*nodewire.Conn]bool{}}
	fe.srv = nodewire.NewServer(nodewire.ServerConfig{Handler: fe})
	served := make(chan struct{})
	go func() { defer close(served); _ = fe.srv.Serve(ln2) }()
	fe.nextReady(t)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	_ = fe.srv.Close()
	<-served
}
