//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one child process, leader of its own process group so that it
// and its children (nginx workers) are stopped together.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// harness owns the child processes and their temporary directory.
type harness struct {
	env   *envInfo
	dir   string
	root  string
	procs []*proc

	mock, edge, node, nginx, goproxy *proc
	floor                            *proc // plain net/http (-nethttp), for the memory floor
	mockAddr, edgeURL                string
	nginxURL, goproxyURL, floorURL   string
	stdins                           []io.Closer        // of the -mockup and -goproxy children
	idle                             map[string]float64 // CPU ns per second while idle, per component
	keep                             bool
}

func newHarness(env *envInfo) *harness { return &harness{env: env} }

func (h *harness) build(ctx context.Context, root string, build bool) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		return fmt.Errorf("-root %s: no go.mod: run from the module root", root)
	}
	h.root = abs
	h.env.Source = gitState(abs)
	if !build {
		h.env.Notes = append(h.env.Notes, "-build=false: measured the binaries already in bin/, which may not match the source state above")
		return nil
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(bctx, "go", "build", "-o", "bin/", "./cmd/iop-edge", "./cmd/iop-node")
	cmd.Dir = abs
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// gitState describes the source tree: commit and whether it has local
// changes.
func gitState(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (no git)"
	}
	s := "commit " + strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		s += " with uncommitted changes"
	}
	return s
}

// start runs argv pinned to cpu (when pinning works) with output to a log
// file in the temp dir.
func (h *harness) start(name string, cpu int, stdout io.Writer, stdin bool, argv ...string) (*proc, io.WriteCloser, error) {
	if h.env.Pinned {
		argv = append([]string{"taskset", "-c", strconv.Itoa(cpu)}, argv...)
	}
	p := &proc{name: name, logPath: filepath.Join(h.dir, name+".log"), done: make(chan struct{})}
	lf, err := os.Create(p.logPath)
	if err != nil {
		return nil, nil, err
	}
	defer lf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = h.dir
	cmd.Stderr = lf
	cmd.Stdout = lf
	if stdout != nil {
		cmd.Stdout = stdout
	}
	var in io.WriteCloser
	if stdin {
		if in, err = cmd.StdinPipe(); err != nil {
			return nil, nil, err
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	h.procs = append(h.procs, p)
	// Owner: the harness; ends when the process exits (stop kills it).
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, in, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after a grace
// period.
func (p *proc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
	}
	// Stragglers of the group (nginx workers) go too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func (h *harness) stopAll() {
	for _, in := range h.stdins {
		_ = in.Close()
	}
	for i := len(h.procs) - 1; i >= 0; i-- {
		h.procs[i].stop()
	}
	switch {
	case h.dir != "" && h.keep:
		logf("kept %s", h.dir)
	case h.dir != "":
		_ = os.RemoveAll(h.dir)
	}
}

// checkLogs notes edge or node output beyond a few warnings, and nginx
// errors.
func (h *harness) checkLogs() {
	if b, err := os.ReadFile(filepath.Join(h.dir, "nginx", "error.log")); err == nil {
		if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) > 0 && lines[0] != "" {
			h.env.Notes = append(h.env.Notes, fmt.Sprintf("nginx logged %d line(s), the first: `%s`", len(lines), lines[0]))
		}
	}
	for _, p := range h.procs {
		if p.name == "edge" || p.name == "node" || p.name == "goproxy" {
			if st, err := os.Stat(p.logPath); err == nil && st.Size() > 1<<20 {
				h.env.Notes = append(h.env.Notes, fmt.Sprintf("%s wrote %.1f MB to stdout/stderr at log.level warn during the run (debug output on the hot path?)", p.name, float64(st.Size())/1e6))
			}
		}
	}
}

func (h *harness) tail(p *proc) string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (h *harness) startAll(ctx context.Context, skipNginx bool) error {
	dir, err := os.MkdirTemp("", "iopbench-")
	if err != nil {
		return err
	}
	h.dir = dir
	if err := h.startMock(ctx); err != nil {
		return err
	}
	if err := h.startIOP(ctx); err != nil {
		return err
	}
	switch path, err := exec.LookPath("nginx"); {
	case skipNginx:
		h.env.Notes = append(h.env.Notes, "nginx skipped (-no-nginx): the nginx column and the targets relative to it are empty")
	case err != nil:
		h.env.Notes = append(h.env.Notes, "nginx is not installed (`which nginx` finds nothing): the nginx column and the targets relative to it are empty; install Debian's nginx (`apt-get install nginx-light`) and rerun")
	default:
		if err := h.startNginx(ctx, path); err != nil {
			return err
		}
	}
	// The Go proxy needs nothing installed, so -no-nginx leaves it.
	if err := h.startGoproxy(ctx); err != nil {
		return err
	}
	return h.startFloor(ctx)
}

// restartGateways stops the edge, the node, the Go proxy and the plain
// net/http server and starts them again (the mock and nginx stay).
func (h *harness) restartGateways(ctx context.Context) error {
	for _, p := range []*proc{h.edge, h.node, h.goproxy, h.floor} {
		if p != nil {
			p.stop()
		}
	}
	if err := h.startIOP(ctx); err != nil {
		return err
	}
	if h.goproxy != nil {
		if err := h.startGoproxy(ctx); err != nil {
			return err
		}
	}
	if h.floor != nil {
		return h.startFloor(ctx)
	}
	return nil
}

// startFloor starts the plain net/http server (this binary with -nethttp)
// on the gateway CPU: the memory a Go server with net/http on its client
// side holds per open stream before any gateway work.
func (h *harness) startFloor(ctx context.Context) (err error) {
	h.floor, h.floorURL, err = h.startServer(ctx, "nethttp", "NETHTTP_ADDR", "-nethttp")
	return err
}

// startChild starts this binary in an internal mode (-mockup, -goproxy)
// pinned to cpu and returns the address it prints as "key host:port". Its
// stdin stays open until stopAll: EOF tells the child the harness is gone.
func (h *harness) startChild(ctx context.Context, name string, cpu int, key string, args ...string) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	pr, pw := io.Pipe()
	p, stdin, err := h.start(name, cpu, pw, true, append([]string{self}, args...)...)
	if err != nil {
		return nil, "", err
	}
	h.stdins = append(h.stdins, stdin)
	addr := make(chan string, 1)
	// Owner: the harness; reads the child's stdout until the pipe is closed
	// below.
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), key+" "); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
	}()
	// Owner: the harness; ends when the child exits (Wait has copied all
	// of its stdout by then), closing the pipe so the reader ends too.
	go func() { <-p.done; _ = pw.Close() }()
	select {
	case a := <-addr:
		return p, a, nil
	case <-p.done:
		return nil, "", fmt.Errorf("%s exited: %v\n%s", name, p.err, h.tail(p))
	case <-time.After(10 * time.Second):
		return nil, "", fmt.Errorf("%s did not report its address in 10s", name)
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

func (h *harness) startMock(ctx context.Context) error {
	p, addr, err := h.startChild(ctx, "mock", loadCPU, "MOCKUP_ADDR", "-mockup")
	if err != nil {
		return err
	}
	h.mock, h.mockAddr = p, addr
	return waitOK(ctx, "http://"+h.mockAddr+"/health", 10*time.Second)
}

// startGoproxy starts the one-hop Go reverse proxy in front of the mock,
// on the gateway CPU like nginx (h.start applies the same nice and, via
// the pinning, GOMAXPROCS 1). /health goes through it to the mock, so the
// check covers the proxy path.
func (h *harness) startGoproxy(ctx context.Context) (err error) {
	h.goproxy, h.goproxyURL, err = h.startServer(ctx, "goproxy", "GOPROXY_ADDR", "-goproxy", h.mockAddr)
	return err
}

// startServer starts this binary as an HTTP server child on the gateway
// CPU and waits until its /health answers; it returns the child and its
// base URL.
func (h *harness) startServer(ctx context.Context, name, key string, args ...string) (*proc, string, error) {
	p, addr, err := h.startChild(ctx, name, gatewayCPU, key, args...)
	if err != nil {
		return nil, "", err
	}
	url := "http://" + addr
	if err := waitOK(ctx, url+"/health", 10*time.Second); err != nil {
		return nil, "", fmt.Errorf("%s not answering: %w\n%s", name, err, h.tail(p))
	}
	return p, url, nil
}

const edgeConfig = `listen:
  http: 127.0.0.1:%[1]d
  node: 127.0.0.1:%[2]d
limits:
  write_timeout_sec: 30
  response_timeout_sec: 300
log:
  level: warn
  format: json
nodes:
  - id: bench
    token: bench-token
    heartbeat_interval_sec: 5
    heartbeat_timeout_sec: 30
    providers:
      - name: upstream
        type: vllm
        base_url: http://%[3]s/v1
        capacity: %[4]d
      - name: mock
        type: mock
        capacity: %[4]d
      - name: mockpaced
        type: mock
        capacity: %[4]d
        delay_ms: %[5]d
models:
  - name: bench-tunnel
    queue_timeout_sec: 60
    max_queue: %[6]d
    providers: [{node: bench, provider: upstream, target: bench-model}]
  - name: bench-run
    queue_timeout_sec: 60
    max_queue: %[6]d
    providers: [{node: bench, provider: mock, target: mock-echo}]
  - name: bench-run-paced
    queue_timeout_sec: 60
    max_queue: %[6]d
    providers: [{node: bench, provider: mockpaced, target: mock-echo}]
`

const nodeConfig = `edge:
  address: 127.0.0.1:%[1]d
node:
  id: bench
  token: bench-token
reconnect:
  interval_sec: 0.5
  max_attempts: 0
store_dir: %[2]s/node-store
workspace_root: %[2]s/node-ws
log:
  level: warn
  format: json
`

// providerCapacity is above the largest stream count so that nothing
// queues; maxQueue bounds pending requests beyond it.
const (
	providerCapacity = 16384
	maxQueue         = 32768
)

func (h *harness) startIOP(ctx context.Context) error {
	httpPort, err := freePort()
	if err != nil {
		return err
	}
	nodePort, err := freePort()
	if err != nil {
		return err
	}
	ecfg := filepath.Join(h.dir, "edge.yaml")
	ncfg := filepath.Join(h.dir, "node.yaml")
	if err := os.WriteFile(ecfg, fmt.Appendf(nil, edgeConfig, httpPort, nodePort, h.mockAddr, providerCapacity, pacing.Milliseconds(), maxQueue), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(ncfg, fmt.Appendf(nil, nodeConfig, nodePort, h.dir), 0o600); err != nil {
		return err
	}
	if h.edge, _, err = h.start("edge", gatewayCPU, nil, false, filepath.Join(h.root, "bin", "iop-edge"), "--config", ecfg); err != nil {
		return err
	}
	if h.node, _, err = h.start("node", gatewayCPU, nil, false, filepath.Join(h.root, "bin", "iop-node"), "--config", ncfg); err != nil {
		return err
	}
	h.edgeURL = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	if err := waitOK(ctx, h.edgeURL+"/readyz", 20*time.Second); err != nil {
		return fmt.Errorf("edge not ready: %w\nedge log:\n%s\nnode log:\n%s", err, h.tail(h.edge), h.tail(h.node))
	}
	return nil
}

const nginxConfig = `worker_processes 1;
worker_rlimit_nofile %[4]d;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events {
    worker_connections %[5]d;
}
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    upstream mock {
        server %[2]s;
        keepalive 256;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:%[3]d;
        location / {
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
        }
    }
}
`

func (h *harness) startNginx(ctx context.Context, bin string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	dir := filepath.Join(h.dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConfig, dir, h.mockAddr, port, max(h.env.Nofile, 1024), max(h.env.Nofile, 1024)-64), 0o644); err != nil {
		return err
	}
	if h.nginx, _, err = h.start("nginx", gatewayCPU, nil, false, bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")); err != nil {
		return err
	}
	h.nginxURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitOK(ctx, h.nginxURL+"/health", 10*time.Second); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return fmt.Errorf("nginx not answering: %w\n%s\n%s", err, h.tail(h.nginx), b)
	}
	return nil
}

// waitOK polls url until it answers 200, bounded by timeout.
func waitOK(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cl := &http.Client{Timeout: time.Second}
	var last error
	for time.Now().Before(deadline) {
		resp, err := cl.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: %v", url, last)
}

func (h *harness) targets() []target {
	ts := []target{{name: "direct", url: "http://" + h.mockAddr, model: "bench-model", streamModel: "bench-model"}}
	if h.nginxURL != "" {
		ts = append(ts, target{name: "nginx", url: h.nginxURL, model: "bench-model", streamModel: "bench-model"})
	}
	if h.goproxyURL != "" {
		ts = append(ts, target{name: "goproxy", url: h.goproxyURL, model: "bench-model", streamModel: "bench-model"})
	}
	return append(ts,
		target{name: "tunnel", url: h.edgeURL, model: "bench-tunnel", streamModel: "bench-tunnel"},
		target{name: "run", url: h.edgeURL, model: "bench-run", streamModel: "bench-run-paced", runPath: true},
	)
}
