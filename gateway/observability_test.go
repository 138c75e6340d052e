package gateway_test

// Observability end to end: /metrics after real traffic holds every series
// of CONTRACT §6 with exactly its label names; the Grafana dashboard only
// queries exported series; per-request values never become labels; access
// log lines carry the request's routing fields and never a secret.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// contractMetric is one row of CONTRACT §6; enums bounds label values.
type contractMetric struct {
	name   string
	typ    dto.MetricType
	labels []string
	enums  map[string][]string
}

var (
	gauge     = dto.MetricType_GAUGE
	counter   = dto.MetricType_COUNTER
	histogram = dto.MetricType_HISTOGRAM
	// route is empty for requests rejected before routing (unknown model,
	// bad JSON): Prometheus treats route="" as the label being absent.
	routes = []string{"tunnel", "run", ""}
)

var contractMetrics = []contractMetric{
	{"iop_node_connected", gauge, []string{"node"}, nil},
	{"iop_provider_up", gauge, []string{"node", "provider"}, nil},
	{"iop_provider_capacity", gauge, []string{"node", "provider"}, nil},
	{"iop_provider_in_flight", gauge, []string{"node", "provider"}, nil},
	{"iop_provider_long_in_flight", gauge, []string{"node", "provider"}, nil},
	{"iop_provider_queued", gauge, []string{"node", "provider"}, nil},
	{"iop_provider_long_queued", gauge, []string{"node", "provider"}, nil},
	{"iop_queue_pending", gauge, []string{"model"}, nil},
	{"iop_queue_wait_seconds", histogram, []string{"model"}, nil},
	{"iop_lease_acquired_total", counter, []string{"node", "provider"}, nil},
	{"iop_lease_released_total", counter, []string{"node", "provider", "reason"},
		map[string][]string{"reason": {"completed", "cancelled", "error", "node_lost"}}},
	{"iop_requests_total", counter, []string{"model", "route", "code"}, map[string][]string{"route": routes}},
	{"iop_request_duration_seconds", histogram, []string{"model", "route"}, map[string][]string{"route": routes}},
	{"iop_time_to_first_token_seconds", histogram, []string{"model", "route"}, map[string][]string{"route": routes}},
	{"iop_tokens_total", counter, []string{"model", "kind"}, map[string][]string{"kind": {"prompt", "completion"}}},
	{"iop_cancellations_total", counter, []string{"reason"},
		map[string][]string{"reason": {"client_disconnect", "timeout", "write_error", "admin"}}},
	{"iop_node_sessions_total", counter, []string{"node", "outcome"},
		map[string][]string{"outcome": {"ready", "rejected", "superseded", "lost"}}},
	// Beyond CONTRACT §6 (added, none renamed): which nodes run an old
	// config after a reload.
	{"iop_node_config_current", gauge, []string{"node"}, nil},
	// Backend load from the nodes' reports, failover and API surfaces.
	{"iop_backend_requests_running", gauge, []string{"node", "provider"}, nil},
	{"iop_backend_requests_waiting", gauge, []string{"node", "provider"}, nil},
	{"iop_backend_kv_cache_usage", gauge, []string{"node", "provider"}, nil},
	{"iop_failovers_total", counter, []string{"model", "reason"},
		map[string][]string{"reason": {"node_lost", "unavailable", "at_capacity"}}},
	{"iop_surface_requests_total", counter, []string{"surface", "code"}, map[string][]string{"surface": {"openai"}}},
	// Responses ids a cluster edge did not share through Redis.
	{"iop_response_ids_unshared_total", counter, []string{"reason"},
		map[string][]string{"reason": {"queue_full", "write_failed", "stopped"}}},
}

const failPrompt = "please fail right now"

// obsStack: node gpu-a with a mock ("demo"; 20 ms per word, fails on
// failPrompt) and a vLLM-like upstream ("qwen-7b", tunnel path).
func obsStack(t *testing.T, mut func(*config.Edge)) *stack.Edge {
	t.Helper()
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if bytes.Contains(bytesOf(r), []byte(`"stream":true`)) {
			writeSSE(w, contentStream("Hello", " there")...)
			return
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	cfg := edgeConfig([]config.ProviderSpec{
		mockProvider("mock", map[string]any{"delay_ms": 20, "fail_trigger": failPrompt}),
		vllmProvider("vllm-main", u.baseURL()),
	}, modelOn("demo", "mock", "mock-echo"), modelOn("qwen-7b", "vllm-main", target))
	if mut != nil {
		mut(cfg)
	}
	e, _ := startStack(t, cfg)
	return e
}

func bytesOf(r *http.Request) []byte {
	var b bytes.Buffer
	_, _ = b.ReadFrom(r.Body)
	return b.Bytes()
}

func chatBody(model, prompt string, stream bool) string {
	p, _ := json.Marshal(prompt)
	s := ""
	if stream {
		s = `"stream":true,"stream_options":{"include_usage":true},`
	}
	return `{"model":"` + model + `",` + s + `"messages":[{"role":"user","content":` + string(p) + `}]}`
}

// obsTraffic sends non-streamed and streamed requests on both paths, a
// failing run, an unknown model, and a client that leaves mid-stream.
func obsTraffic(t *testing.T, e *stack.Edge) {
	t.Helper()
	c := httpClient(t)
	for _, m := range []string{"demo", "qwen-7b"} {
		for _, stream := range []bool{false, true} {
			if r := do(t, c, http.MethodPost, e.URL+"/v1/chat/completions", chatBody(m, "hello metrics", stream), nil); r.Status != http.StatusOK {
				t.Fatalf("%s stream=%v: %d %s", m, stream, r.Status, r.Body)
			}
		}
	}
	if r := do(t, c, http.MethodPost, e.URL+"/v1/chat/completions", chatBody("demo", failPrompt, false), nil); r.Status < 500 {
		t.Fatalf("failing run: %d %s", r.Status, r.Body)
	}
	assertError(t, do(t, c, http.MethodPost, e.URL+"/v1/chat/completions", chatBody("nope", "x", false), nil), http.StatusNotFound, "model_not_found")
	before := cancellations(t, e, "client_disconnect")
	_, _, cancel := openStream(t, e.URL+"/v1/chat/completions", chatBody("demo", strings.Repeat("word ", 200), true))
	cancel()
	waitReleased(t, e, "mock")
	stack.WaitFor(t, waitLong, "the cancellation to be counted", func() bool { return cancellations(t, e, "client_disconnect") == before+1 })
}

// scrape reads GET /metrics and parses the text format.
func scrape(t *testing.T, e *stack.Edge) map[string]*dto.MetricFamily {
	t.Helper()
	r := do(t, httpClient(t), http.MethodGet, e.URL+"/metrics", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics: %d", r.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	sort.Strings(out)
	return out
}

func TestMetricsContractAfterTraffic(t *testing.T) {
	e := obsStack(t, nil)
	obsTraffic(t, e)
	mfs := scrape(t, e)

	t.Run("every contract metric with its labels", func(t *testing.T) {
		for _, cm := range contractMetrics {
			mf := mfs[cm.name]
			if mf == nil {
				t.Errorf("%s: not exported after traffic", cm.name)
				continue
			}
			if mf.GetType() != cm.typ {
				t.Errorf("%s: type %s, want %s", cm.name, mf.GetType(), cm.typ)
			}
			want := slices.Sorted(slices.Values(cm.labels))
			for _, m := range mf.GetMetric() {
				if got := labelNames(m); !slices.Equal(got, want) {
					t.Errorf("%s: labels %v, want exactly %v", cm.name, got, want)
				}
				for _, l := range m.GetLabel() {
					if allowed, ok := cm.enums[l.GetName()]; ok && !slices.Contains(allowed, l.GetValue()) {
						t.Errorf("%s: %s=%q is outside %q", cm.name, l.GetName(), l.GetValue(), allowed)
					}
				}
			}
		}
	})

	t.Run("traffic shows in the series", func(t *testing.T) {
		has := func(name string, labels map[string]string) bool {
			return metric(t, e.Registry, name, labels) > 0
		}
		for _, c := range []struct {
			name   string
			labels map[string]string
		}{
			{"iop_node_connected", map[string]string{"node": nodeID}},
			{"iop_provider_up", map[string]string{"node": nodeID, "provider": "vllm-main"}},
			{"iop_provider_capacity", map[string]string{"node": nodeID, "provider": "mock"}},
			{"iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": "200"}},
			{"iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": "200"}},
			{"iop_requests_total", map[string]string{"model": "unknown", "route": "", "code": "404"}},
			{"iop_tokens_total", map[string]string{"model": "demo", "kind": "completion"}},
			{"iop_tokens_total", map[string]string{"model": "qwen-7b", "kind": "prompt"}},
			{"iop_lease_released_total", map[string]string{"node": nodeID, "provider": "mock", "reason": "completed"}},
			{"iop_lease_released_total", map[string]string{"node": nodeID, "provider": "mock", "reason": "error"}},
			{"iop_lease_released_total", map[string]string{"node": nodeID, "provider": "mock", "reason": "cancelled"}},
			{"iop_lease_acquired_total", map[string]string{"node": nodeID, "provider": "vllm-main"}},
			{"iop_cancellations_total", map[string]string{"reason": "client_disconnect"}},
			{"iop_node_sessions_total", map[string]string{"node": nodeID, "outcome": "ready"}},
		} {
			if !has(c.name, c.labels) {
				t.Errorf("%s%v: no count after traffic", c.name, c.labels)
			}
		}
		for _, h := range []string{"iop_queue_wait_seconds", "iop_request_duration_seconds", "iop_time_to_first_token_seconds"} {
			var n uint64
			for _, m := range mfs[h].GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
			if n == 0 {
				t.Errorf("%s: no observations after traffic", h)
			}
		}
	})

	t.Run("dashboard queries only exported contract series", func(t *testing.T) {
		names := dashboardMetrics(t)
		if len(names) < 10 {
			t.Fatalf("dashboard queries only %d iop_* series: %v", len(names), names)
		}
		contract := map[string]dto.MetricType{}
		for _, cm := range contractMetrics {
			contract[cm.name] = cm.typ
		}
		for _, n := range names {
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suf); ok && contract[b] == histogram {
					base = b
				}
			}
			if _, ok := contract[base]; !ok {
				t.Errorf("dashboard queries %s, which is not a CONTRACT §6 metric", n)
			} else if mfs[base] == nil {
				t.Errorf("dashboard queries %s, which /metrics does not export", n)
			}
		}
		for _, cm := range contractMetrics {
			if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, cm.name) }) {
				t.Errorf("the dashboard does not chart %s", cm.name)
			}
		}
		// Every label a query matches on or groups by exists on the metric
		// it reads (le on histogram buckets).
		labelsOf := map[string][]string{}
		for _, cm := range contractMetrics {
			labelsOf[cm.name] = cm.labels
			if cm.typ == histogram {
				labelsOf[cm.name+"_bucket"] = append(slices.Clone(cm.labels), "le")
				labelsOf[cm.name+"_sum"], labelsOf[cm.name+"_count"] = cm.labels, cm.labels
			}
		}
		for _, q := range dashboardQueries(t) {
			for n, labels := range q.selectors {
				for _, l := range labels {
					if !slices.Contains(labelsOf[n], l) {
						t.Errorf("dashboard query uses label %q, which %s does not have:\n%s", l, n, q.expr)
					}
				}
			}
		}
	})
}

// grafanaVars are the dashboard's variables and Grafana's built-in
// intervals, replaced by values PromQL accepts before parsing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")

// dashboardQuery is one PromQL expression of the dashboard, parsed.
type dashboardQuery struct {
	expr string
	// selectors maps each metric the expression reads to the label names
	// it matches on or groups by.
	selectors map[string][]string
}

// dashboardQueries parses every PromQL string of the dashboard (panel
// targets and template variable queries) with Prometheus's own parser.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	raw, err := os.ReadFile("../configs/grafana/dashboards/iop.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && strings.Contains(s, "iop_") && (k == "expr" || k == "query" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)
	p := parser.NewParser(parser.Options{})
	var out []dashboardQuery
	for _, e := range exprs {
		src := grafanaVars.Replace(e)
		// Variable queries: label_values(metric, label).
		if m := labelValues.FindStringSubmatch(src); m != nil {
			src = m[1]
			q := parseQuery(t, p, e, src)
			q.selectors[firstMetric(q)] = append(q.selectors[firstMetric(q)], m[2])
			out = append(out, q)
			continue
		}
		out = append(out, parseQuery(t, p, e, src))
	}
	return out
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

func firstMetric(q dashboardQuery) string {
	for n := range q.selectors {
		return n
	}
	return ""
}

func parseQuery(t *testing.T, p parser.Parser, orig, src string) dashboardQuery {
	t.Helper()
	expr, err := p.ParseExpr(src)
	if err != nil {
		t.Errorf("dashboard query does not parse: %v\n%s", err, orig)
		return dashboardQuery{expr: orig, selectors: map[string][]string{}}
	}
	q := dashboardQuery{expr: orig, selectors: map[string][]string{}}
	var grouping []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch x := n.(type) {
		case *parser.VectorSelector:
			labels := []string{}
			for _, m := range x.LabelMatchers {
				if m.Name != "__name__" {
					labels = append(labels, m.Name)
				}
			}
			q.selectors[x.Name] = append(q.selectors[x.Name], labels...)
		case *parser.AggregateExpr:
			grouping = append(grouping, x.Grouping...)
		}
		return nil
	})
	// Grouping labels must exist on every metric the expression reads.
	for n := range q.selectors {
		q.selectors[n] = append(q.selectors[n], grouping...)
	}
	return q
}

// dashboardMetrics returns every iop_* metric name the dashboard reads.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	set := map[string]bool{}
	for _, q := range dashboardQueries(t) {
		for n := range q.selectors {
			set[n] = true
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for n := range set {
			if !yield(n) {
				return
			}
		}
	})
}

// seriesSet is every series of reg as "name{label=value,…}".
func seriesSet(t *testing.T, e *stack.Edge) map[string]bool {
	t.Helper()
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = true
		}
	}
	return out
}

// 1,000 requests, each with its own request id, API key and session id,
// add no series: labels are bounded by config, never per request/key/user.
func TestMetricsCardinalityBounded(t *testing.T) {
	const n = 1000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("sk-card-%04d", i)
	}
	// 8 clients on 4 slots: requests also queue and are handed freed slots.
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.APIKeys = keys
	e, _ := startStack(t, cfg)

	ctx := ctxT(t)
	send := func(c *http.Client, i int) error {
		r, err := tryDo(ctx, c, http.MethodPost, e.URL+"/v1/chat/completions", chatBody("demo", "count me", i%2 == 1), map[string]string{
			"Authorization":    "Bearer " + keys[i],
			"X-Request-Id":     fmt.Sprintf("card-req-%d", i),
			"X-IOP-Session-Id": fmt.Sprintf("card-session-%d", i),
		})
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("request %d: %d %s", i, r.Status, r.Body)
		}
		return nil
	}
	c := httpClient(t)
	for i := range 2 { // warm-up: one non-streamed, one streamed
		if err := send(c, i); err != nil {
			t.Fatal(err)
		}
	}
	before := seriesSet(t, e)

	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := httpClient(t)
			for i := range next {
				if err := send(wc, i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitReleased(t, e, "mock")

	after := seriesSet(t, e)
	for s := range after {
		if !before[s] {
			t.Errorf("new series after warm-up: %s", s)
		}
		if strings.Contains(s, "card-") || strings.Contains(s, "sk-") {
			t.Errorf("series carries a per-request value: %s", s)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d series after %d requests, %d after warm-up", len(after), n, len(before))
	}
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": "200"}); got != n+2 {
		t.Errorf("iop_requests_total = %v, want %d", got, n+2)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Sync() error { return nil }

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func jsonLogger(buf *syncBuffer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, buf, zap.DebugLevel))
}

// Access log lines name the request, model, node, provider and route; no
// log line (edge or node, at debug level) carries an API key, the admin or
// node token, the node's upstream key or prompt text.
func TestAccessLogFieldsAndNoSecrets(t *testing.T) {
	const (
		apiKey     = "sk-obs-api-key-7f3a9c"
		wrongKey   = "sk-obs-wrong-key-1b2c"
		adminToken = "adm-obs-token-5e6d"
		nodeTok    = "node-obs-token-9a8b"
		prompt     = "zebra-marker-31415 tell me a secret story"
	)
	edgeLog, nodeLog := &syncBuffer{}, &syncBuffer{}
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil), vllmProvider("vllm-main", u.baseURL())},
		modelOn("demo", "mock", "mock-echo"), modelOn("qwen-7b", "vllm-main", target))
	cfg.Nodes[0].Token = nodeTok
	cfg.Auth.APIKeys = []string{apiKey}
	cfg.Auth.AdminToken = adminToken
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Logger: jsonLogger(edgeLog)})
	stack.StartNode(t, e.NodeAddr, nodeID, stack.NodeOptions{Token: nodeTok, Getenv: nodeEnv, Logger: jsonLogger(nodeLog)})
	e.WaitReady(t, nodeID, waitLong)

	c := httpClient(t)
	auth := func(key, id string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + key, "X-Request-Id": id}
	}
	for _, rq := range []struct {
		id, model, key string
		stream         bool
		status         int
	}{
		{"obs-req-run", "demo", apiKey, false, 200},
		{"obs-req-run-stream", "demo", apiKey, true, 200},
		{"obs-req-tunnel", "qwen-7b", apiKey, false, 200},
		{"obs-req-badkey", "demo", wrongKey, false, 401},
		{"obs-req-nomodel", "nope", apiKey, false, 404},
	} {
		if r := do(t, c, http.MethodPost, e.URL+"/v1/chat/completions", chatBody(rq.model, prompt, rq.stream), auth(rq.key, rq.id)); r.Status != rq.status {
			t.Fatalf("%s: %d %s", rq.id, r.Status, r.Body)
		}
	}
	if r := do(t, c, http.MethodGet, e.URL+"/admin/status", "", auth(adminToken, "obs-admin")); r.Status != http.StatusOK {
		t.Fatalf("/admin/status: %d", r.Status)
	}
	if r := do(t, c, http.MethodGet, e.URL+"/admin/status", "", auth(wrongKey, "obs-admin-bad")); r.Status != http.StatusUnauthorized {
		t.Fatalf("/admin/status with a wrong token: %d", r.Status)
	}
	waitReleased(t, e, "mock")

	lines := map[string]map[string]any{}
	for _, ln := range strings.Split(edgeLog.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(ln), &m) == nil && m["msg"] == "request" {
			if id, _ := m["request_id"].(string); id != "" {
				lines[id] = m
			}
		}
	}
	for id, want := range map[string]map[string]any{
		"obs-req-run":        {"model": "demo", "node_id": nodeID, "provider": "mock", "route": "run", "status": 200.0},
		"obs-req-run-stream": {"model": "demo", "node_id": nodeID, "provider": "mock", "route": "run", "status": 200.0},
		"obs-req-tunnel":     {"model": "qwen-7b", "node_id": nodeID, "provider": "vllm-main", "route": "tunnel", "status": 200.0},
		"obs-req-badkey":     {"status": 401.0},
		"obs-req-nomodel":    {"status": 404.0},
	} {
		got := lines[id]
		if got == nil {
			t.Errorf("no access log line for %s", id)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v (line %v)", id, k, got[k], v, got)
			}
		}
		for _, k := range []string{"request_id", "model", "node_id", "provider", "route", "duration"} {
			if _, ok := got[k]; !ok {
				t.Errorf("%s: access log line lacks %q: %v", id, k, got)
			}
		}
	}
	for name, log := range map[string]string{"edge": edgeLog.String(), "node": nodeLog.String()} {
		if log == "" {
			t.Errorf("%s logged nothing", name)
		}
		for _, secret := range []string{apiKey, wrongKey, adminToken, nodeTok, upstreamKey, "zebra-marker-31415"} {
			if strings.Contains(log, secret) {
				t.Errorf("%s log contains %q", name, secret)
			}
		}
	}
}

// Without tracing (the no-op tracer), a caller's trace context is still
// continued: its trace id is logged. A request without one logs none.
func TestNoTracingKeepsCallerTraceID(t *testing.T) {
	edgeLog := &syncBuffer{}
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Logger: jsonLogger(edgeLog)})
	c := httpClient(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for id, hdr := range map[string]map[string]string{
		"trace-caller": {"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01", "X-Request-Id": "trace-caller"},
		"trace-none":   {"X-Request-Id": "trace-none"},
	} {
		if r := do(t, c, http.MethodGet, e.URL+"/v1/models", "", hdr); r.Status != http.StatusOK {
			t.Fatalf("%s: /v1/models: %d %s", id, r.Status, r.Body)
		}
	}
	lines := map[string]map[string]any{}
	for _, ln := range strings.Split(edgeLog.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(ln), &m) == nil && m["msg"] == "request" {
			id, _ := m["request_id"].(string)
			lines[id] = m
		}
	}
	if got := lines["trace-caller"]; got == nil || got["trace_id"] != traceID {
		t.Errorf("request with a traceparent: access log line %v, want trace_id %s", got, traceID)
	}
	if got := lines["trace-none"]; got == nil {
		t.Error("no access log line for the request without a traceparent")
	} else if _, ok := got["trace_id"]; ok {
		t.Errorf("request without a traceparent logged a trace id: %v", got)
	}
}
