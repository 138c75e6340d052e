//go:build linux

package gateway_test

// The /admin status page: served without the admin token (it asks for it),
// self-contained, guarded by a CSP that admits exactly its inline blocks;
// /admin/events needs the token; and in a real headless Chromium the page
// renders the live node, provider, queue and event rows.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testproc"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// errorText is the page's error line in a dumped DOM.
var errorText = regexp.MustCompile(`id="error"[^>]*>([^<]*)<`)

func TestStatusPageServedWithoutToken(t *testing.T) {
	e := pageStack(t, nil)
	r := do(t, httpClient(t), http.MethodGet, e.URL+"/admin", "", nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /admin: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
	body := string(r.Body)
	for _, id := range []string{`id="nodes"`, `id="providers"`, `id="models"`, `id="events"`, `id="token-input"`} {
		if !strings.Contains(body, id) {
			t.Errorf("page lacks %s", id)
		}
	}
	// Self-contained: no external script, style, image or font.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(`).FindString(body); m != "" {
		t.Errorf("page references an external asset: %q", m)
	}
	if strings.Contains(body, "<script src") || strings.Contains(body, `rel="stylesheet"`) {
		t.Error("page loads a script or stylesheet file")
	}
	// The CSP admits exactly the inline blocks, by hash.
	csp := r.Header.Get("Content-Security-Policy")
	for _, tag := range []string{"script", "style"} {
		re := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`)
		blocks := re.FindAllStringSubmatch(body, -1)
		if len(blocks) == 0 {
			t.Errorf("no inline <%s>", tag)
		}
		for _, b := range blocks {
			sum := sha256.Sum256([]byte(b[1]))
			if h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, tag+"-src "+h) {
				t.Errorf("CSP %q does not admit the <%s> block (%s)", csp, tag, h)
			}
		}
	}
	for _, want := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP lacks %q: %s", want, csp)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP allows unsafe sources: %s", csp)
	}
	if r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers: %v", r.Header)
	}
	// The page's data endpoints stay guarded.
	assertError(t, do(t, httpClient(t), http.MethodGet, e.URL+"/admin/status", "", nil), http.StatusUnauthorized, "invalid_admin_token")
}

func TestAdminEvents(t *testing.T) {
	e := pageStack(t, nil)
	c := httpClient(t)
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer wrong"}} {
		r := do(t, c, http.MethodGet, e.URL+"/admin/events", "", hdr)
		assertError(t, r, http.StatusUnauthorized, "invalid_admin_token")
	}
	r := do(t, c, http.MethodGet, e.URL+"/admin/events", "", map[string]string{"Authorization": "Bearer " + pageAdminToken})
	if r.Status != http.StatusOK {
		t.Fatalf("/admin/events: %d %s", r.Status, r.Body)
	}
	var doc struct {
		Events []struct {
			Type   string    `json:"type"`
			NodeID string    `json:"node_id"`
			Reason string    `json:"reason"`
			Time   time.Time `json:"time"`
		} `json:"events"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	if len(doc.Events) == 0 || doc.Events[len(doc.Events)-1].Type != "node.connected" || doc.Events[len(doc.Events)-1].NodeID != nodeID ||
		doc.Events[len(doc.Events)-1].Time.IsZero() {
		t.Errorf("events %s: want node.connected for %s last", r.Body, nodeID)
	}
	if bytes.Contains(r.Body, []byte(nodeToken)) {
		t.Errorf("events leak the node token: %s", r.Body)
	}
}

// chromium returns the browser, installing Debian's package when the
// environment asks for browser tests (IOP_BROWSER_TESTS=1 or CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	const bin = "/usr/bin/chromium"
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if os.Getenv("IOP_BROWSER_TESTS") != "1" && os.Getenv("CI") != "true" {
		t.Skipf("%s is missing: install Debian's chromium package, or set IOP_BROWSER_TESTS=1 to let this test install it", bin)
	}
	sh := testproc.Shell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh, "-c", "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("installing chromium (browser tests were requested): %v\n%s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("chromium installed but %s is missing: %v", bin, err)
	}
	return bin
}

// dumpDOM renders url in headless Chromium and returns the DOM after the
// page's scripts ran.
func dumpDOM(t *testing.T, bin, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\nstderr:\n%s", err, stderr.String())
	}
	return stdout.String()
}

// cells maps each element of a row to its text, by class, for every <tr>
// with class rowClass.
func cells(t *testing.T, dom, rowClass string) []map[string]string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]string
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(text(c))
		}
		return b.String()
	}
	var collect func(n *html.Node, row map[string]string)
	collect = func(n *html.Node, row map[string]string) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode {
				for _, a := range c.Attr {
					if a.Key == "class" {
						for _, cls := range strings.Fields(a.Val) {
							row[cls] = strings.TrimSpace(text(c))
						}
					}
					if strings.HasPrefix(a.Key, "data-") {
						row[a.Key] = a.Val
					}
				}
			}
			collect(c, row)
		}
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tr" {
			for _, a := range n.Attr {
				if a.Key == "class" && a.Val == rowClass {
					row := map[string]string{}
					for _, b := range n.Attr {
						if strings.HasPrefix(b.Key, "data-") {
							row[b.Key] = b.Val
						}
					}
					collect(n, row)
					rows = append(rows, row)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return rows
}

// In a real browser, with one lease held and one request queued, the page
// (token from the URL fragment) shows the connected node, the provider's
// 1/1 occupancy and its queued request, the model's pending count and the
// node's connect event.
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromium(t)
	e := pageStack(t, map[string]any{"delay_ms": 500})
	// Ten minutes of deltas (go test's default timeout): held until the
	// test cancels it, however slowly the browser runs.
	words := strings.Repeat("word ", 1200)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		waitReleased(t, e, "mock")
	})
	// Without the client's 60 s timeout: on a loaded machine the two
	// browser runs can take longer, and a request the client gave up on
	// is neither in flight nor queued any more. The test's cancel ends
	// both requests.
	c := httpClient(t)
	c.Timeout = 0
	send := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = tryDo(ctx, c, http.MethodPost, e.URL+"/v1/chat/completions", chatBody("demo", words, false), nil)
		}()
	}
	send()
	stack.WaitFor(t, waitLong, "the first request to hold the lease", func() bool { return inFlight(e, "mock") == 1 })
	send()
	stack.WaitFor(t, waitLong, "the second request to queue", func() bool {
		st := e.Dispatcher.Status()
		return len(st.Models) == 1 && st.Models[0].Pending == 1
	})

	// Without the token the page loads, asks for it and shows no data.
	dom := dumpDOM(t, bin, e.URL+"/admin")
	if m := errorText.FindStringSubmatch(dom); m == nil || m[1] != "this edge needs an admin token" || len(cells(t, dom, "node-row")) != 0 {
		t.Errorf("without a token the page should ask for one and show no rows; error %v", m)
	}

	dom = dumpDOM(t, bin, e.URL+"/admin#token="+pageAdminToken)
	if strings.Contains(dom, pageAdminToken) {
		t.Error("the admin token shows in the page")
	}
	nodes := cells(t, dom, "node-row")
	if len(nodes) != 1 || nodes[0]["data-node"] != nodeID || nodes[0]["node-id"] != nodeID ||
		nodes[0]["node-connected"] != "connected" || nodes[0]["node-providers"] != "1" {
		t.Errorf("node rows %v", nodes)
	}
	provs := cells(t, dom, "provider-row")
	want := map[string]string{
		"data-node": nodeID, "data-provider": "mock", "provider-id": "mock", "provider-type": "mock",
		"provider-status": "available", "provider-health": "ok",
		"in-flight": "1/1", "long-in-flight": "0/1", "queued": "1", "long-queued": "0", "backend": "0 / 0", "kv": "0%",
	}
	if len(provs) != 1 {
		t.Errorf("provider rows %v", provs)
	} else {
		for k, v := range want {
			if provs[0][k] != v {
				t.Errorf("provider row %s = %q, want %q (row %v)", k, provs[0][k], v, provs[0])
			}
		}
	}
	if !strings.Contains(dom, `class="fill full" style="width: 100%;"`) {
		t.Error("the provider's occupancy bar is not full")
	}
	models := cells(t, dom, "model-row")
	if len(models) != 1 || models[0]["model-name"] != "demo" || models[0]["model-pending"] != "1" {
		t.Errorf("model rows %v", models)
	}
	events := cells(t, dom, "event-row")
	if len(events) == 0 || events[0]["event-type"] != "node.connected" || events[0]["event-node"] != nodeID {
		t.Errorf("event rows %v", events)
	}
	for id, v := range map[string]string{"sum-nodes": "1/1", "sum-providers": "1/1", "sum-inflight": "1/1", "sum-pending": "1"} {
		if !regexp.MustCompile(`id="` + id + `">` + regexp.QuoteMeta(v) + `<`).MatchString(dom) {
			t.Errorf("summary %s is not %q", id, v)
		}
	}
	if m := errorText.FindStringSubmatch(dom); m == nil || m[1] != "" {
		t.Errorf("page shows an error: %v", m)
	}
}

// With its node gone and a request waiting for it, the page says what is
// missing instead of 0/0, and the waiting request shows on the provider.
func TestStatusPageOfflineNode(t *testing.T) {
	bin := chromium(t)
	e, n := pageStackNode(t, nil)
	n.Stop()
	stack.WaitFor(t, waitLong, "the node to go offline", func() bool { return !e.Dispatcher.Status().Nodes[0].Connected })
	// Without the client's 60 s timeout: on a loaded machine the browser
	// run can take longer, and a request the client gave up on is no
	// longer waiting. The test's cancel ends it.
	c := httpClient(t)
	c.Timeout = 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // Owner: the test; stops when its cleanup cancels ctx.
		defer close(done)
		_, _ = tryDo(ctx, c, http.MethodPost, e.URL+"/v1/chat/completions", chatBody("demo", "hi", false), nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	stack.WaitFor(t, waitLong, "the request to queue", func() bool { return e.Dispatcher.Status().Models[0].Pending == 1 })

	dom := dumpDOM(t, bin, e.URL+"/admin#token="+pageAdminToken)
	provs := cells(t, dom, "provider-row")
	if len(provs) != 1 || provs[0]["in-flight"] != "offline: 1 missing" || provs[0]["queued"] != "0 (1)" {
		t.Errorf("offline provider row %v", provs)
	}
	if !regexp.MustCompile(`id="sum-inflight">0/0 \(1 offline\)<`).MatchString(dom) {
		t.Error("the summary does not say the offline capacity")
	}
}

func TestStatusPageHead(t *testing.T) {
	e := pageStack(t, nil)
	r := do(t, httpClient(t), http.MethodHead, e.URL+"/admin", "", nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("HEAD /admin: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
}

// Events carry their reason: a refused registration (its reason, never the
// token) and a node's disconnection.
func TestAdminEventsReasons(t *testing.T) {
	e, n := pageStackNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	_, _, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: e.NodeAddr}, &iop.RegisterRequest{
		ProtocolVersion: nodewire.ProtocolVersion, NodeId: nodeID, Token: "wrong-token-9z"})
	if err == nil {
		t.Fatal("a wrong token was accepted")
	}
	n.Stop()
	stack.WaitFor(t, waitLong, "the disconnection", func() bool { return !e.Dispatcher.Status().Nodes[0].Connected })
	r := do(t, httpClient(t), http.MethodGet, e.URL+"/admin/events", "", map[string]string{"Authorization": "Bearer " + pageAdminToken})
	body := string(r.Body)
	for _, want := range []string{`"type":"node.rejected","node_id":"` + nodeID + `","reason":"invalid node token"`, `"type":"node.disconnected","node_id":"` + nodeID + `","reason":"`} {
		if !strings.Contains(body, want) {
			t.Errorf("events lack %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "wrong-token-9z") {
		t.Error("an event shows the token")
	}
}
