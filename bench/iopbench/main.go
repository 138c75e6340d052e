//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iop-gateway/iop/bench/mockup"
)

// plan is what one run measures; quick and full differ only here.
type plan struct {
	latWarm, latN  int           // c=1 warm-up and measured requests
	idleN          int           // c=1 requests measured after an idle gap each
	idleGap        time.Duration // the gap before each of them
	tputConc       int           // throughput concurrency
	tputDur        time.Duration // throughput duration per path
	pacedN         int           // paced streams per path, over pacedRounds rounds
	pacedRounds    int           // rounds of the paced phase (pacedN/pacedRounds streams at once)
	pacedStagger   time.Duration // between paced stream starts
	steps          []int         // concurrent paced stream steps
	stepHold       time.Duration // every step's streams overlap at least this long
	rampRate       int           // stream starts per second in step and hold tests
	stepTries      int           // attempts per step; one clean attempt passes it
	rounds         int           // latency and throughput rounds over all paths
	holdN          []int         // concurrent long-paced streams for RSS
	holdInterval   time.Duration // pacing of the long-paced streams
	holdPrompt     int           // bytes added to each held stream's prompt (0: the usual few hundred)
	overallTimeout time.Duration
	phases, paths  map[string]bool
}

type opts struct {
	quick, skipNginx, build, keep bool
	out, root                     string
	nice                          int
}

var (
	fullPlan = plan{
		latWarm: 200, latN: 2000, idleN: 400, idleGap: 5 * time.Millisecond, tputConc: 32, tputDur: 10 * time.Second,
		pacedN: 150, pacedRounds: 6, pacedStagger: 10 * time.Millisecond,
		steps: []int{100, 250, 500, 1000, 2000, 5000, 10000}, stepHold: 2 * time.Second, rampRate: 1000, stepTries: 2, rounds: 4,
		holdN: []int{1000, 10000}, holdInterval: 5 * time.Second, overallTimeout: 14 * time.Minute,
	}
	quickPlan = plan{
		latWarm: 50, latN: 300, idleN: 100, idleGap: 5 * time.Millisecond, tputConc: 32, tputDur: 3 * time.Second,
		pacedN: 20, pacedRounds: 2, pacedStagger: 10 * time.Millisecond,
		steps: []int{100, 250}, stepHold: time.Second, rampRate: 1000, stepTries: 1, rounds: 2,
		holdN: []int{1000}, holdInterval: 5 * time.Second, overallTimeout: 4 * time.Minute,
	}
)

// counts parses a comma-separated list of positive counts for flag name,
// exiting with a usage error on anything else.
func counts(name, list string) []int {
	var out []int
	for _, x := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "iopbench: -%s: %q is not a positive stream count\n", name, x)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

// pathNames are the measurable paths, in report order (see targets).
var pathNames = []string{"direct", "nginx", "goproxy", "tunnel", "run"}

// phaseNames are the phases of a run, in the order they run.
var phaseNames = []string{"latency", "throughput", "paced", "steps", "memory"}

const (
	pacing     = mockup.DefaultInterval
	maxGap     = 10 * pacing
	loadCPU    = 1
	gatewayCPU = 0
)

func main() {
	mock := flag.Bool("mockup", false, "serve the mock upstream on 127.0.0.1 (internal: the harness starts it)")
	goproxy := flag.String("goproxy", "", "serve httputil.ReverseProxy to this upstream (host:port) on 127.0.0.1 (internal: the harness starts it)")
	floor := flag.Bool("nethttp", false, "serve the mock API through plain net/http, no hijacking, on 127.0.0.1 (internal: the harness starts it)")
	quick := flag.Bool("quick", false, "short run (~1 minute)")
	out := flag.String("out", "", "write the Markdown report to this file")
	root := flag.String("root", ".", "module root to build from")
	skipNginx := flag.Bool("no-nginx", false, "do not use nginx even when installed")
	keep := flag.Bool("keep", false, "keep the temporary directory (configs, logs) and print its path")
	build := flag.Bool("build", true, "build bin/iop-edge and bin/iop-node first (false: use the binaries already there)")
	nice := flag.Int("nice", -10, "nice value for the harness and every process it starts (needs privilege below 0; 0 leaves it)")
	paths := flag.String("paths", strings.Join(pathNames, ","), "paths to measure, comma-separated (added figures need direct)")
	phases := flag.String("phases", strings.Join(phaseNames, ","), "phases to run, comma-separated")
	steps := flag.String("steps", "", "concurrent paced stream steps, comma-separated, e.g. 1000,2000,5000 (default: the plan's; quick 100,250, full 100 to 10000)")
	hold := flag.String("hold", "", "concurrent held streams of the memory phase, comma-separated (default: the plan's; quick 1000, full 1000,10000)")
	holdPrompt := flag.Int("hold-prompt", 0, "bytes added to each held stream's prompt in the memory phase (0: the usual few hundred)")
	flag.Parse()
	if *mock {
		os.Exit(serveChild("mockup", "MOCKUP_ADDR", mockup.Server()))
	}
	if *goproxy != "" {
		os.Exit(serveGoproxy(*goproxy))
	}
	if *floor {
		os.Exit(serveChild("nethttp", "NETHTTP_ADDR", &http.Server{Handler: mockup.NetHTTPHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}))
	}
	p := fullPlan
	if *quick {
		p = quickPlan
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, p.overallTimeout)
	defer cancel()
	p.paths = map[string]bool{}
	for _, x := range strings.Split(*paths, ",") {
		x = strings.TrimSpace(x)
		// A misspelt path would otherwise be measured silently as nothing.
		if !slices.Contains(pathNames, x) {
			fmt.Fprintf(os.Stderr, "iopbench: -paths: unknown path %q (known: %s)\n", x, strings.Join(pathNames, ", "))
			os.Exit(2)
		}
		p.paths[x] = true
	}
	if *steps != "" {
		p.steps = counts("steps", *steps)
	}
	if *hold != "" {
		p.holdN = counts("hold", *hold)
	}
	if *holdPrompt < 0 || *holdPrompt > 4<<20 {
		fmt.Fprintf(os.Stderr, "iopbench: -hold-prompt: %d is not between 0 and 4 MiB\n", *holdPrompt)
		os.Exit(2)
	}
	p.holdPrompt = *holdPrompt
	p.phases = map[string]bool{}
	for _, ph := range strings.Split(*phases, ",") {
		ph = strings.TrimSpace(ph)
		// A misspelt phase would otherwise measure nothing and still write
		// a report (over -out) and succeed.
		if !slices.Contains(phaseNames, ph) {
			fmt.Fprintf(os.Stderr, "iopbench: -phases: unknown phase %q (known: %s)\n", ph, strings.Join(phaseNames, ", "))
			os.Exit(2)
		}
		p.phases[ph] = true
	}
	err := run(ctx, p, opts{quick: *quick, out: *out, root: *root, skipNginx: *skipNginx, nice: *nice, build: *build, keep: *keep})
	if err != nil {
		fmt.Fprintln(os.Stderr, "iopbench:", err)
		os.Exit(1)
	}
}

// serveChild is the body of an internal child mode (-mockup, -goproxy): it
// listens on a free loopback port, prints "key host:port" on stdout for the
// harness, and serves srv until SIGTERM/SIGINT or its parent closes stdin.
func serveChild(name, key string, srv *http.Server) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	fmt.Printf("%s %s\n", key, ln.Addr())
	// Owner: serveChild; ends when the parent closes stdin or exits.
	go func() {
		// The parent holds our stdin open; EOF means it is gone.
		var b [1]byte
		_, _ = os.Stdin.Read(b[:])
		_ = srv.Close()
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	// Owner: serveChild; ends at the first SIGTERM/SIGINT (or with the process).
	go func() { <-sig; _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, p plan, o opts) error {
	start := time.Now()
	env := &envInfo{Command: strings.TrimSpace("go run ./bench/iopbench " + strings.Join(os.Args[1:], " "))}
	env.collect()
	env.Quick = o.quick
	env.Nice = o.nice
	if o.nice != 0 {
		if err := renice(o.nice); err != nil {
			env.Nice = 0
			env.Notes = append(env.Notes, fmt.Sprintf("could not set nice %d (%v): the benchmark competes with other processes at equal priority", o.nice, err))
		}
	}
	nofile, err := raiseNofile()
	env.Nofile = nofile
	if err != nil {
		env.Notes = append(env.Notes, "could not raise RLIMIT_NOFILE: "+err.Error())
	}
	env.Pinned = canPin()
	if !env.Pinned {
		env.Notes = append(env.Notes, "taskset missing or fewer than 2 CPUs: every process runs unpinned")
	} else if err := pinSelf(loadCPU); err != nil {
		env.Pinned = false
		env.Notes = append(env.Notes, "pinning the load generator failed ("+err.Error()+"): runs unpinned")
	}

	h := newHarness(env)
	h.keep = o.keep
	defer h.stopAll()
	if o.build {
		logf("building bin/iop-edge, bin/iop-node")
	}
	if err := h.build(ctx, o.root, o.build); err != nil {
		return err
	}
	logf("starting mock upstream, edge, node, nginx, goproxy")
	if err := h.startAll(ctx, o.skipNginx); err != nil {
		return err
	}
	h.measureIdle(2 * time.Second)
	env.Idle = h.idle
	res := &results{Env: env, Plan: p}
	var targets []target
	for _, t := range h.targets() {
		if p.paths[t.name] {
			targets = append(targets, t)
		}
	}
	for _, t := range targets {
		res.Paths = append(res.Paths, t.name)
	}
	if err := measureAll(ctx, h, p, targets, res); err != nil {
		res.Aborted = err.Error()
		logf("measurement stopped: %v", err)
	}
	res.Elapsed = time.Since(start)
	env.LoadEnd = loadavg()
	h.checkLogs()
	md := res.markdown()
	fmt.Println(md)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	if res.Aborted != "" {
		return errors.New(res.Aborted)
	}
	return nil
}

func measureAll(ctx context.Context, h *harness, p plan, targets []target, res *results) error {
	cl := newClient()
	defer cl.CloseIdleConnections()
	// Each phase runs in rounds that visit every path in turn, so that a
	// burst of outside load on a shared machine hits all paths alike.
	lat := make([]latencyResult, len(targets))
	idle := make([]latencyResult, len(targets))
	tput := make([]throughputResult, len(targets))
	paced := make([]pacedResult, len(targets))
	// Filled in place, so that an early stop still reports what was measured.
	if p.phases["latency"] {
		res.Latency, res.LatencyIdle = lat, idle
	}
	if p.phases["throughput"] {
		res.Throughput = tput
	}
	if p.phases["paced"] {
		res.Paced = paced
	}
	for round := range p.rounds {
		for i, t := range targets {
			if !p.phases["latency"] {
				break
			}
			warm := 20
			if round == 0 {
				warm = p.latWarm
			}
			logf("c=1 latency: %s, round %d/%d (%d + %d requests)", t.name, round+1, p.rounds, warm, p.latN/p.rounds)
			r, err := latencyRun(ctx, cl, t, warm, p.latN/p.rounds, 0)
			if err != nil {
				return fmt.Errorf("latency %s: %w", t.name, err)
			}
			lat[i].merge(r)
			logf("c=1 latency after %s idle: %s, round %d/%d (%d requests)", p.idleGap, t.name, round+1, p.rounds, p.idleN/p.rounds)
			r, err = latencyRun(ctx, cl, t, 5, p.idleN/p.rounds, p.idleGap)
			if err != nil {
				return fmt.Errorf("idle latency %s: %w", t.name, err)
			}
			idle[i].merge(r)
		}
	}
	for round := range p.rounds {
		for i, t := range targets {
			if !p.phases["throughput"] {
				break
			}
			logf("c=%d throughput: %s, round %d/%d (%s)", p.tputConc, t.name, round+1, p.rounds, p.tputDur/time.Duration(p.rounds))
			r, err := throughputRun(ctx, cl, t, p.tputConc, p.tputDur/time.Duration(p.rounds), h)
			if err != nil {
				return fmt.Errorf("throughput %s: %w", t.name, err)
			}
			tput[i].merge(r)
		}
	}
	// Many short rounds, each visiting every path in turn: a gap p99 is a
	// tail, and one burst of outside load during one path's round would
	// otherwise decide it.
	for round := range p.pacedRounds {
		for i, t := range targets {
			if !p.phases["paced"] {
				break
			}
			logf("paced streams: %s, round %d/%d (%d streams, %d chunks %s apart)", t.name, round+1, p.pacedRounds, p.pacedN/p.pacedRounds, mockup.DefaultChunks, pacing)
			r, err := pacedRun(ctx, h, cl, t, p.pacedN/p.pacedRounds, p.pacedStagger)
			if err != nil {
				return fmt.Errorf("paced %s: %w", t.name, err)
			}
			paced[i].merge(r)
		}
	}
	cl.CloseIdleConnections()
	for _, t := range targets {
		if !p.phases["steps"] {
			break
		}
		r := stepRun(ctx, h, t, p)
		res.Steps = append(res.Steps, r)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	// Memory: the tunnel first (its 10,000-stream figure is a target), then
	// the one-hop Go proxy as the reference for what a Go gateway holds per
	// stream, then a plain net/http server: the floor of any gateway that
	// keeps net/http on its client side, as the edge does.
	// The gateways start afresh for it: their RSS is then what the held
	// streams cost, not what the earlier phases left in their heaps.
	if p.phases["memory"] && len(p.phases) > 1 {
		logf("restarting edge, node, goproxy and nethttp for the memory phase")
		if err := h.restartGateways(ctx); err != nil {
			return err
		}
		// The edge listens on new ports: the same paths, new addresses.
		var fresh []target
		for _, t := range h.targets() {
			if _, ok := find(targets, t.name, func(t target) string { return t.name }); ok {
				fresh = append(fresh, t)
			}
		}
		targets = fresh
	}
	memTargets := append(targets, target{name: "nethttp", url: h.floorURL, model: "bench-model", streamModel: "bench-model"})
	for _, name := range []string{"tunnel", "goproxy", "nethttp"} {
		t, ok := find(memTargets, name, func(t target) string { return t.name })
		if !ok || !p.phases["memory"] || (name == "nethttp" && h.floorURL == "") {
			continue
		}
		res.Hold = append(res.Hold, h.holdSample(name, "idle", 0, nil))
		for _, n := range p.holdN {
			// The one-hop proxy holds two sockets per stream (client and
			// upstream) in one process, edge and node one each; past
			// RLIMIT_NOFILE it would measure refused connections, not memory.
			if fds := descriptors(name, n); name == "goproxy" && fds > h.env.Nofile {
				res.Hold = append(res.Hold, holdResult{Path: name, Label: fmt.Sprintf("%d streams", n), Want: n, Skipped: true,
					Note: fmt.Sprintf("skipped: needs ~%d descriptors in one process, RLIMIT_NOFILE is %d", fds, h.env.Nofile)})
				continue
			}
			logf("RSS: %d concurrent long-paced %s streams", n, name)
			r := holdRun(ctx, h, t, n, p)
			res.Hold = append(res.Hold, r)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
