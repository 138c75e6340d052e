package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// shortGrace is the cancel grace of the edges startEdgeShortGrace starts
// (dispatch's default is 5 s): how long a cancelled exchange waits for the
// node's terminal message before its lease returns. A node that answers
// the cancel does so within milliseconds; tests of a node that never does
// wait the grace out, so they shorten it, still far above what a loaded
// machine under -race adds to a step.
const shortGrace = 500 * time.Millisecond

// deadlineRoute is one way a request reaches a node.
type deadlineRoute struct {
	name, path, body, provider string
}

func deadlineRoutes(content string) []deadlineRoute {
	msg := `"messages":[{"role":"user","content":"` + content + `"}]}`
	return []deadlineRoute{
		{"tunnel", "/v1/chat/completions", `{"model":"qwen-7b",` + msg, "vllm-main"},
		{"tunnel stream", "/v1/chat/completions", `{"model":"qwen-7b","stream":true,` + msg, "vllm-main"},
		{"run", "/v1/chat/completions", `{"model":"demo",` + msg, "mock"},
		{"run stream", "/v1/chat/completions", `{"model":"demo","stream":true,` + msg, "mock"},
	}
}

// runIDOf is the run id of a run or tunnel request.
func runIDOf(env *iop.Envelope) string {
	if r := env.GetRunRequest(); r != nil {
		return r.GetRunId()
	}
	return env.GetProviderTunnelRequest().GetRunId()
}

// leaseBack waits until provider holds no lease and returns when that
// happened.
func leaseBack(t *testing.T, e *stack.Edge, provider string) time.Time {
	t.Helper()
	stack.WaitFor(t, waitLong, provider+" lease back", func() bool { return inFlight(e, provider) == 0 })
	return time.Now()
}

// A node that heartbeats but never answers (nor answers the cancel): the
// response timeout still ends the request on time with the OpenAI
// envelope, and the lease comes back after the cancel grace, on every
// route.
func TestSilentNodeResponseTimeout(t *testing.T) {
	const timeout = time.Second
	// What the edge may add to the response timeout before the client
	// has its answer (~65 ms under -race on an idle machine); time the
	// process was kept from running (schedLag) comes on top. Half the
	// timeout, so that a timer firing a timeout late is caught with room
	// to spare.
	const slack = 500 * time.Millisecond
	cfg := fakeNodeConfig(t)
	cfg.Limits.ResponseTimeoutSec = 1
	e := startEdgeShortGrace(t, cfg)
	n := startFakeNode(t, e, silent)
	lag := startSchedLag(t)
	for i, rt := range deadlineRoutes("hello") {
		leases := func() float64 {
			return metric(t, e.Registry, "iop_lease_acquired_total", map[string]string{"node": nodeID, "provider": rt.provider})
		}
		before := leases()
		start := time.Now()
		answer := postAsync(t, e, rt.path, rt.body)
		// The response timeout runs from the lease on (the exchange's
		// open): parsing the request and taking the lease in Redis come
		// before it, and on a loaded machine take what they take. The
		// counter is seen after the lease was taken, so the time from
		// then is at most the edge's own.
		stack.WaitFor(t, waitLong, rt.name+" lease taken", func() bool { return leases() > before })
		leased, lostAtLease := time.Now(), lag.Lost()
		r := waitFor(t, answer, waitLong, rt.name+" answer")
		answered, sinceLease := time.Since(start), time.Since(leased)
		lostToAnswer := lag.Lost() - lostAtLease
		assertError(t, r, http.StatusBadGateway, "upstream_error")
		if !strings.Contains(string(r.Body), "did not answer in time") {
			t.Errorf("%s: %s", rt.name, r.Body)
		}
		// From the request's start the answer can only be later than from
		// the lease: the lower bound holds there as well.
		if answered < timeout || sinceLease > timeout+slack+lostToAnswer {
			t.Errorf("%s: answered after %s (%s after the lease, %s of it stalled), want within [%s, %s + stalls]",
				rt.name, answered, sinceLease, lostToAnswer, timeout, timeout+slack)
		}
		req := n.nextRequest(t)
		c := n.nextCancel(t)
		if c.GetKind() != iop.CancelKind_CANCEL_KIND_CANCEL_RUN || c.GetRunId() != runIDOf(req) || c.GetReason() != "timeout" {
			t.Errorf("%s: cancel %v for run %s", rt.name, c, runIDOf(req))
		}
		backAt := leaseBack(t, e, rt.provider)
		back, backSinceLease, lostToBack := backAt.Sub(start), backAt.Sub(leased), lag.Lost()-lostAtLease
		if backSinceLease > timeout+shortGrace+time.Second+lostToBack {
			t.Errorf("%s: lease back %s after it was taken (%s of it stalled), want at most %s + stalls",
				rt.name, backSinceLease, lostToBack, timeout+shortGrace+time.Second)
		}
		// The lease waits for the node's terminal (the node's own slot)
		// for the grace, not less: the response timeout runs from the
		// lease on (after start), the grace from the cancel on (after
		// the timeout), so neither timer's firing late can mask an
		// early return.
		if back < timeout+shortGrace {
			t.Errorf("%s: lease back %s after the request (%s after the answer), before the timeout and the grace (%s)", rt.name, back, back-answered, timeout+shortGrace)
		}
		t.Logf("%s: response timeout %s -> client answered after %s (%s after the lease, %s stalled), lease back after %s", rt.name, timeout,
			answered.Round(time.Millisecond), sinceLease.Round(time.Millisecond), lostToAnswer.Round(time.Millisecond), back.Round(time.Millisecond))
		if got := cancellations(t, e, "timeout"); got != float64(i+1) {
			t.Errorf("%s: timeout cancellations %v, want %d", rt.name, got, i+1)
		}
	}
}

// A client that hangs up while a silent node holds its request frees the
// lease within the grace, whatever the node does.
func TestSilentNodeClientHangUp(t *testing.T) {
	e := startEdgeShortGrace(t, fakeNodeConfig(t)) // response timeout: the default 300 s
	n := startFakeNode(t, e, silent)
	for _, rt := range deadlineRoutes("hello") {
		hangUp, done := postInBackground(t, e.URL+rt.path, rt.body)
		req := n.nextRequest(t)
		before := time.Now()
		hangUp()
		at := time.Now()
		if err := waitFor(t, done, waitLong, "the client to return"); err == nil {
			t.Fatalf("%s: request completed despite the hang-up", rt.name)
		}
		cancel := n.nextCancel(t)
		if cancel.GetRunId() != runIDOf(req) || cancel.GetReason() != "client_disconnect" {
			t.Errorf("%s: cancel %v", rt.name, cancel)
		}
		backAt := leaseBack(t, e, rt.provider)
		back := backAt.Sub(at)
		if back > shortGrace+time.Second {
			t.Errorf("%s: lease back %s after the hang-up, want at most %s", rt.name, back, shortGrace+time.Second)
		}
		// The edge sees the hang-up once hangUp has begun, and waits the
		// grace from then on for the node's terminal, not less.
		if since := backAt.Sub(before); since < shortGrace {
			t.Errorf("%s: lease back %s after the hang-up, before the grace (%s)", rt.name, since, shortGrace)
		}
		t.Logf("%s: client hang-up with a silent node -> lease back after %s", rt.name, back.Round(time.Millisecond))
	}
	if got := cancellations(t, e, "client_disconnect"); got != 4 {
		t.Errorf("client_disconnect cancellations %v, want 4", got)
	}
}

// A request body larger than the stream window, to a node that never
// reads (never grants window): sending it is bounded by the response
// timeout, and by the client's going away.
func TestLargeBodyToNodeThatGrantsNoWindow(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	t.Run("response timeout", func(t *testing.T) {
		const timeout = time.Second
		cfg := fakeNodeConfig(t)
		cfg.Limits.ResponseTimeoutSec = 1
		e := startEdge(t, cfg)
		startFakeNode(t, e, nil)
		for _, rt := range deadlineRoutes(big)[:3] {
			leases := func() float64 {
				return metric(t, e.Registry, "iop_lease_acquired_total", map[string]string{"node": nodeID, "provider": rt.provider})
			}
			before := leases()
			start := time.Now()
			answer := postAsync(t, e, rt.path, rt.body)
			// The response timeout runs from the lease on: uploading and
			// parsing the 1 MiB body before it is no part of it (seconds
			// on a loaded machine under -race). The lease counter cannot
			// be missed by polling, and is seen after the lease was
			// taken: the time from then is at most the edge's own.
			stack.WaitFor(t, waitLong, rt.name+" lease taken", func() bool { return leases() > before })
			leased := time.Now()
			r := waitFor(t, answer, waitLong, rt.name+" answer")
			answered, sinceLease := time.Since(start), time.Since(leased)
			assertError(t, r, http.StatusBadGateway, "upstream_error")
			// From the request's start, the answer can only be later than
			// from the lease: the lower bound holds there as well.
			if answered < timeout || sinceLease > timeout+time.Second {
				t.Errorf("%s: answered after %s (%s after the lease), want within [%s, %s]", rt.name, answered, sinceLease, timeout, timeout+time.Second)
			}
			// The node never had the request: nothing to drain.
			back := leaseBack(t, e, rt.provider).Sub(start)
			if back > answered+time.Second {
				t.Errorf("%s: lease back after %s (answer after %s)", rt.name, back, answered)
			}
			t.Logf("%s: 1 MiB body, no window -> client answered after %s (%s after the lease), lease back after %s", rt.name,
				answered.Round(time.Millisecond), sinceLease.Round(time.Millisecond), back.Round(time.Millisecond))
		}
		if got := cancellations(t, e, "timeout"); got != 3 {
			t.Errorf("timeout cancellations %v, want 3", got)
		}
	})
	t.Run("client hang-up", func(t *testing.T) {
		e := startEdge(t, fakeNodeConfig(t))
		startFakeNode(t, e, nil)
		for _, rt := range deadlineRoutes(big)[:3] {
			hangUp, done := postInBackground(t, e.URL+rt.path, rt.body)
			stack.WaitFor(t, waitLong, "the lease taken", func() bool { return inFlight(e, rt.provider) == 1 })
			hangUp()
			at := time.Now()
			waitFor(t, done, waitLong, "the client to return")
			back := leaseBack(t, e, rt.provider).Sub(at)
			if back > time.Second {
				t.Errorf("%s: lease back %s after the hang-up", rt.name, back)
			}
			t.Logf("%s: 1 MiB body, no window, client hang-up -> lease back after %s", rt.name, back.Round(time.Millisecond))
		}
	})
}

func idleConfig(cfg *config.Edge) {
	one := 1
	cfg.Limits.StreamIdleTimeoutSec = &one
}

// A tunnelled event stream that goes silent after its first byte for
// longer than the stream idle timeout ends with an error event, never
// [DONE], and the upstream request is cancelled.
func TestStreamIdleTimeoutTunnel(t *testing.T) {
	gone := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, chunk(`{"role":"assistant","content":""}`, "null"), chunk(`{"content":"Once"}`, "null"))
		<-r.Context().Done()
		close(gone)
	})
	s := tunnelStack(t, u, idleConfig)

	start := time.Now()
	r := post(t, s.Edge, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"tell"}]}`)
	took := time.Since(start)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	events := readEvents(t, r.Body)
	if len(events) != 3 || !strings.HasPrefix(events[2], `{"error":`) || strings.Contains(string(r.Body), "[DONE]") {
		t.Fatalf("events %q, want the two upstream events and an error event", events)
	}
	checkEnvelope(t, []byte(events[2]), "upstream_error")
	if took > 3*time.Second {
		t.Errorf("stream ended %s after the request (idle timeout 1 s)", took)
	}
	waitFor(t, gone, waitLong, "the upstream request to be cancelled")
	t.Logf("SSE tunnel: idle timeout 1 s -> error event, stream ended after %s", took.Round(time.Millisecond))
	waitReleased(t, s.Edge, "vllm-main")
	if got := cancellations(t, s.Edge, "timeout"); got != 1 {
		t.Errorf("timeout cancellations %v, want 1", got)
	}
}

// stallAfterBody answers a tunnel with a 200 JSON status and the start of
// a body, then goes silent (reading on, recording the cancel).
func stallAfterBody(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
	n.record(first)
	runID := first.GetProviderTunnelRequest().GetRunId()
	_ = st.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Sequence: 1, RunId: runID, StatusCode: 200,
		Headers: []*iop.Header{{Name: "Content-Type", Value: "application/json"}}}))
	_ = st.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 2, RunId: runID,
		Body: []byte(`{"id":"chatcmpl-1","object":"chat.completion",`)}))
	silent(n, ctx, st, nil)
}

func tunnelFrameEnv(f *iop.ProviderTunnelFrame) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: f}}
}

// A plain (non-SSE) tunnelled body that stalls after its first bytes: a
// whole answer (held until its end) becomes a 502 envelope; a body relayed
// as it comes (the client asked for a stream) is cut, so the client cannot
// take it for whole. Either way the node is told to cancel.
func TestStreamIdleTimeoutTunnelPlainBody(t *testing.T) {
	cfg := fakeNodeConfig(t)
	idleConfig(cfg)
	e := startEdgeShortGrace(t, cfg)
	n := startFakeNode(t, e, stallAfterBody)

	start := time.Now()
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"whole"}]}`)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("held answer: 502 after %s (idle timeout 1 s)", took)
	}
	if c := n.nextCancel(t); c.GetReason() != "timeout" {
		t.Errorf("cancel %v", c)
	}
	t.Logf("held answer: idle timeout 1 s -> 502 after %s", time.Since(start).Round(time.Millisecond))

	_, err := tryDo(ctxT(t), httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions",
		`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"plain"}]}`, nil)
	if err == nil {
		t.Error("a stalled plain body ended cleanly")
	}
	if c := n.nextCancel(t); c.GetReason() != "timeout" {
		t.Errorf("cancel %v", c)
	}
	waitReleased(t, e, "vllm-main")
	if got := cancellations(t, e, "timeout"); got != 2 {
		t.Errorf("timeout cancellations %v, want 2", got)
	}
}

// The same on the run route: the mock's second word comes 5 s after the
// first; with a 1 s idle timeout the stream ends with an error event and
// the node's run is cancelled.
func TestStreamIdleTimeoutRun(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", map[string]any{"delay_ms": 5000})}, modelOn("demo", "mock", "mock-echo"))
	idleConfig(cfg)
	e, node := startStack(t, cfg)
	start := time.Now()
	r := post(t, e, "/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"one two three"}]}`)
	took := time.Since(start)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	events := readEvents(t, r.Body)
	last := events[len(events)-1]
	if !strings.Contains(string(r.Body), `"content":"one"`) || !strings.HasPrefix(last, `{"error":`) || strings.Contains(string(r.Body), "[DONE]") {
		t.Fatalf("events %q, want the first word then an error event", events)
	}
	checkEnvelope(t, []byte(last), "upstream_error")
	if !strings.Contains(last, "stream idle timeout") {
		t.Errorf("error event %s, want it to name the stream idle timeout (the answer had started)", last)
	}
	if took > 3*time.Second {
		t.Errorf("stream ended %s after the request (idle timeout 1 s)", took)
	}
	t.Logf("run stream: idle 1 s -> error event, stream ended after %s", took.Round(time.Millisecond))
	waitReleased(t, e, "mock")
	stack.WaitFor(t, waitLong, "the node's run cancelled", func() bool {
		u := nodeUsage(t, node)
		return len(u) == 1 && u[0].Errors == 1
	})
	if got := cancellations(t, e, "timeout"); got != 1 {
		t.Errorf("timeout cancellations %v, want 1", got)
	}
}
