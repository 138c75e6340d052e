package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testwait"
)

// Every test stops what it started (nodes, proxies, edges, HTTP clients)
// before it returns, so no goroutine may be left once all have run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLong bounds every wait on a condition: generous, because the suite
// runs with the race detector on two cores shared with other jobs.
const waitLong = 30 * time.Second

// quietLogger logs only errors (to the test log): chaos makes nodes warn
// about every reconnect, which would drown the output.
func quietLogger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
}

func mockProvider(name string, delayMS, capacity int) config.ProviderSpec {
	return config.ProviderSpec{Name: name, Type: "mock", Capacity: capacity, Extra: map[string]any{"delay_ms": delayMS}}
}

func nodeSpec(id, token string, hbInterval, hbTimeout float64, providers ...config.ProviderSpec) config.NodeSpec {
	return config.NodeSpec{ID: id, Token: token, HeartbeatIntervalSec: hbInterval, HeartbeatTimeoutSec: hbTimeout, Providers: providers}
}

// model is a model group over (node, provider) pairs, all with target "x".
func model(name string, queueTimeoutSec float64, cands ...[2]string) config.ModelSpec {
	m := config.ModelSpec{Name: name, QueueTimeoutSec: queueTimeoutSec, MaxQueue: 4096}
	for _, c := range cands {
		m.Providers = append(m.Providers, config.ModelProvider{Node: c[0], Provider: c[1], Target: "x"})
	}
	return m
}

// newClient is an HTTP client of its own whose idle connections are closed
// at cleanup (goleak would see their read/write loops otherwise).
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// randWords returns n distinct-looking words; the mock echoes them back, so
// a response's content proves the whole answer arrived.
func randWords(rng *rand.Rand, n int) []string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("w%d_%x", i, rng.Uint32())
	}
	return w
}

func chatBody(model string, words []string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model":    model,
		"stream":   stream,
		"messages": []map[string]string{{"role": "user", "content": strings.Join(words, " ")}},
	})
	return string(b)
}

// result classifies one client exchange.
type result struct {
	ok        bool   // a complete, correct answer
	kind      string // "ok", or how it failed explicitly ("503 queue_timeout", "sse upstream_error")
	violation string // non-empty: the contract was broken (hang, [DONE] after an error, …)
	gaps      []time.Duration
}

// doChat sends one chat request and checks the answer against the contract:
// a complete response (content = the echoed words, finish chunk + [DONE] for
// streams) or an explicit error (envelope; SSE error event with no [DONE]
// after it). ctx is the per-request deadline: hitting it is a hang.
func doChat(ctx context.Context, c *http.Client, url, model string, words []string, stream bool) result {
	return doChatObserved(ctx, c, url, model, words, stream, nil)
}

// doChatObserved is doChat calling onEvent (when set) after each SSE event.
func doChatObserved(ctx context.Context, c *http.Client, url, model string, words []string, stream bool, onEvent func()) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(chatBody(model, words, stream)))
	if err != nil {
		return result{violation: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return result{violation: "hang: no response before the deadline"}
		}
		return result{violation: "transport error before a response: " + err.Error()}
	}
	defer resp.Body.Close()
	want := strings.Join(words, " ")
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		code, err := envelopeCode(body)
		if err != nil {
			return result{violation: fmt.Sprintf("status %d without an error envelope: %v: %.200q", resp.StatusCode, err, body)}
		}
		if resp.StatusCode == http.StatusInternalServerError {
			return result{violation: "500: " + string(body)}
		}
		return result{kind: fmt.Sprintf("%d %s", resp.StatusCode, code)}
	}
	if !stream {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return result{violation: "200 body broke: " + err.Error()}
		}
		var doc struct {
			Choices []struct {
				Message      struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal(body, &doc); err != nil || len(doc.Choices) != 1 {
			return result{violation: fmt.Sprintf("200 with a bad body: %v %.200q", err, body)}
		}
		if got := doc.Choices[0].Message.Content; got != want {
			return result{violation: fmt.Sprintf("200 with content %.80q, want %.80q", got, want)}
		}
		if doc.Choices[0].FinishReason == nil || *doc.Choices[0].FinishReason == "" {
			return result{violation: "200 without a finish_reason"}
		}
		return result{ok: true, kind: "ok"}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return result{violation: fmt.Sprintf("stream answered %d with Content-Type %q (request %s), body %.200q", resp.StatusCode, ct, resp.Header.Get("X-Request-Id"), b)}
	}
	return readStream(ctx, resp.Body, want, onEvent)
}

// readStream consumes an SSE chat stream to its end and judges it.
func readStream(ctx context.Context, body io.Reader, want string, onEvent func()) result {
	var (
		content  strings.Builder
		done     bool
		errCode  string
		finished bool
		gaps     []time.Duration
		last     = time.Now()
	)
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data: ") {
			now := time.Now()
			gaps = append(gaps, now.Sub(last))
			last = now
			if onEvent != nil {
				onEvent()
			}
			data := strings.TrimSpace(strings.TrimPrefix(line, "data: "))
			switch {
			case data == "[DONE]":
				if errCode != "" {
					return result{violation: "[DONE] after an error event"}
				}
				if done {
					return result{violation: "two [DONE]"}
				}
				done = true
			case done:
				return result{violation: "event after [DONE]: " + data}
			case errCode != "":
				return result{violation: "event after the error event: " + data}
			default:
				var ev struct {
					Error *struct {
						Code    string `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
					Choices []struct {
						Delta        struct{ Content string }
						FinishReason *string `json:"finish_reason"`
					}
				}
				if jerr := json.Unmarshal([]byte(data), &ev); jerr != nil {
					return result{violation: fmt.Sprintf("undecodable event %.120q", data)}
				}
				if ev.Error != nil {
					errCode = ev.Error.Code
					if errCode == "" || ev.Error.Message == "" {
						return result{violation: "error event without code or message: " + data}
					}
					continue
				}
				for _, ch := range ev.Choices {
					content.WriteString(ch.Delta.Content)
					if ch.FinishReason != nil && *ch.FinishReason != "" {
						finished = true
					}
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				if ctx.Err() != nil {
					return result{violation: "hang: stream still open at the deadline"}
				}
				return result{violation: "stream broke without an error event: " + err.Error()}
			}
			break
		}
	}
	switch {
	case errCode != "":
		return result{kind: "sse " + errCode, gaps: gaps}
	case !done:
		return result{violation: "stream ended without [DONE] or an error event"}
	case !finished:
		return result{violation: "[DONE] without a finish chunk"}
	case content.String() != want:
		return result{violation: fmt.Sprintf("[DONE] with content %.80q, want %.80q", content.String(), want)}
	}
	return result{ok: true, kind: "ok", gaps: gaps}
}

// envelopeCode checks body is the OpenAI error envelope and returns its code.
func envelopeCode(body []byte) (string, error) {
	var env struct {
		Error *struct {
			Message *string         `json:"message"`
			Type    *string         `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    *string         `json:"code"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil {
		return "", err
	}
	e := env.Error
	switch {
	case e == nil:
		return "", errors.New("no error object")
	case e.Message == nil || *e.Message == "":
		return "", errors.New("no message")
	case e.Type == nil || *e.Type == "":
		return "", errors.New("no type")
	case e.Param == nil:
		return "", errors.New("no param member")
	case e.Code == nil || *e.Code == "":
		return "", errors.New("no code")
	}
	return *e.Code, nil
}

// metric sums the counter or gauge name over the series whose labels
// include every pair in match.
func metric(t testing.TB, reg prometheus.Gatherer, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range match {
				if have[k] != v {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// unsettled describes what is still in flight or queued, "" when nothing.
func unsettled(d *dispatch.Dispatcher) string {
	var out []string
	st := d.Status()
	for _, n := range st.Nodes {
		for _, p := range n.Providers {
			if p.InFlight != 0 || p.LongInFlight != 0 || p.Queued != 0 || p.LongQueued != 0 {
				out = append(out, fmt.Sprintf("%s/%s in_flight=%d queued=%d", n.ID, p.ProviderId, p.InFlight, p.Queued))
			}
		}
	}
	for _, m := range st.Models {
		if m.Pending != 0 {
			out = append(out, fmt.Sprintf("model %s pending=%d", m.Name, m.Pending))
		}
	}
	return strings.Join(out, "; ")
}

// waitSettled waits until no lease is held and nothing waits, then checks
// that every acquired lease was released exactly once by the metrics.
func waitSettled(t testing.TB, d *dispatch.Dispatcher, reg prometheus.Gatherer) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		u := unsettled(d)
		if u == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after %s: %s", waitLong, u)
		}
		time.Sleep(10 * time.Millisecond)
	}
	acq := metric(t, reg, "iop_lease_acquired_total", nil)
	rel := metric(t, reg, "iop_lease_released_total", nil)
	if acq != rel {
		t.Fatalf("leases acquired %v != released %v", acq, rel)
	}
}

func connected(d *dispatch.Dispatcher, id string) bool {
	for _, n := range d.Status().Nodes {
		if n.ID == id {
			return n.Connected
		}
	}
	return false
}

func inFlight(d *dispatch.Dispatcher, node string) int {
	for _, n := range d.Status().Nodes {
		if n.ID == node {
			s := 0
			for _, p := range n.Providers {
				s += int(p.InFlight)
			}
			return s
		}
	}
	return -1
}

func pending(d *dispatch.Dispatcher, model string) int {
	for _, m := range d.Status().Models {
		if m.Name == model {
			return m.Pending
		}
	}
	return -1
}

// chatAsync runs doChatObserved on its own goroutine and delivers the
// result on the returned channel. The goroutine's owner is the caller, who
// must receive from the channel; it stops when the exchange ends or ctx's
// deadline (the hang bound) passes.
func chatAsync(ctx context.Context, c *http.Client, url, model string, words []string, stream bool, onEvent func()) <-chan result {
	ch := make(chan result, 1)
	// Owner: the caller, who receives from ch. Stops when the exchange
	// ends or ctx's deadline passes; ch is buffered, so it never blocks.
	go func() { ch <- doChatObserved(ctx, c, url, model, words, stream, onEvent) }()
	return ch
}

// await receives one result or fails the test after d, naming what.
func await(t testing.TB, ch <-chan result, d time.Duration, what string) result {
	t.Helper()
	return testwait.Recv(t, ch, d, what)
}

// percentile of ds (sorted copy), p in [0,1].
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

var waitFor = stack.WaitFor
