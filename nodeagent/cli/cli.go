// Package cli is the adapter that runs CLI coding agents (claude, codex, ...)
// as child processes of the Node.
//
// # Runs
//
// A run executes AdapterConfig.command as an argv (never through a shell;
// argv[0] is resolved with exec.LookPath against the Node's PATH at run
// time) in workspace_root/<RunRequest.workspace>, which must stay inside the
// workspace root (see resolveWorkspace). The prompt rendered from the run
// input (see prompt.go) is written to stdin, which is then closed. stdout is
// streamed back as deltas chunk by chunk as it is read, never splitting a
// UTF-8 sequence; stderr is kept, bounded, for the error message.
//
// Exit status 0 completes the run with finish reason "stop" and no usage: a
// CLI reports no token counts and a guess would pollute usage accounting. A
// non-zero status fails it with code upstream_error and the stderr tail. A
// timeout (RunRequest.timeout_sec when > 0, else timeout_sec of the config, 0
// meaning none) fails it with code timeout; cancellation returns an error
// wrapping ctx.Err().
//
// The CLI leads its own process group. Stopping a run sends SIGTERM to the
// group and SIGKILL after kill_grace_ms; once the CLI itself has exited, what
// is left of its group is killed, so no descendant outlives its run (Linux;
// elsewhere descendants are signalled only while the CLI is alive). Those
// the Node inherits as their parents die (it is PID 1 in the iop-node image,
// which has no init) are reaped, not left as zombies. A process that left
// the group (setsid) is beyond reach; should it hold stdout open, the run
// still ends, with the CLI's answer, 2 s after the CLI's exit (time spent
// in the sink not counted) or once more has come since than the pipe can
// hold, whichever is first.
//
// # Environment
//
// The child's environment holds only HOME, LANG and PATH plus the names
// listed in env_allow, with their values on the Node (Env.Getenv); unset or
// empty variables are left out. Nothing else is inherited. Since a CLI runs
// as the Node's user, building a cli adapter makes the Node non-dumpable
// (Linux): its /proc/<pid>/environ, mem and fd are then closed to its CLIs
// (and to debuggers without root).
//
// # Sessions
//
// A run with a session id is part of a session. Runs of one session are
// serialized. The first run of a session appends session_args to the
// command; once a run has succeeded (and, when session_id_regex is set, the
// CLI's own session id has been captured from its output), later runs append
// resume_args instead and send only the last user message. In both, the
// placeholder "{session}" becomes the captured CLI session id, or the iop
// session id when none is captured, and "{session_uuid}" becomes a stable
// UUID derived from the instance name and the iop session id; a first run
// that started the CLI and failed moves it to a new one for the next first
// run, since the CLI may have registered the old one. Neither id may start
// with "-", which the CLI would read as an option: such an iop session id
// is refused (invalid_request), such a captured id ignored.
//
// Examples (check them against the CLI version you deploy):
//
//	claude: command ["claude", "-p"]
//	        session_args ["--session-id", "{session_uuid}"]
//	        resume_args  ["--resume", "{session_uuid}"]
//	codex:  command ["codex", "exec", "--skip-git-repo-check"]
//	        resume_args ["resume", "{session}"]
//	        session_id_regex "session id: ([0-9a-f-]{36})"
//	        session_id_stream "stderr"
//
// (codex exec reads the prompt from stdin when none is given as an argument,
// prints its session id in the banner it writes to stderr, and continues a
// session with "codex exec resume <id>".)
//
// An instance keeps at most max_sessions sessions (default 1000), in memory
// and under the store. A new session beyond that evicts the least recently
// used session that no run holds or waits for, removing its state as
// TerminateSession does: a later run of its id starts a fresh session. If a
// run holds or waits for every session, the new session is refused with
// capacity_exceeded. Sessions persisted over the bound (by a Node with a
// higher one) are removed at first use, least recently used first, and so
// are session directories without state (a state write that failed removes
// the directory it created; a crash may leave one).
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Type is the adapter type name (AdapterConfig.type).
const Type = "cli"

// instance is one configured cli adapter instance.
type instance struct {
	name          string
	workspaceRoot string // absolute
	storeDir      string // absolute
	getenv        func(string) string
	log           *zap.Logger
	// unguardedMu guards unguardedSeen: the causes of runs without their
	// guard already warned of (noteUnguarded); at most maxUnguardedCauses.
	unguardedMu   sync.Mutex
	unguardedSeen map[unguardedCause]struct{}

	mu       sync.Mutex
	cfg      *config             // guarded by mu; replaced by Reconfigure, runs take a snapshot
	sessions map[string]*session // guarded by mu; by iop session id
	// idle is the sentinel of a ring of the sessions without users
	// (session.users) that are not terminated: idle.next is the most
	// recently used, idle.prev the next to evict. Guarded by mu.
	idle session
	live int // guarded by mu; sessions in the map that are not terminated

	// loaded registers the sessions persisted by an earlier Node process
	// on first use, not in New: a refresh that changes the config builds
	// (and drops) an instance to validate it while holding the agent's
	// lock, and reading thousands of state files there would stall every
	// run's admission.
	loaded sync.Once
}

var (
	_ adapter.Instance       = (*instance)(nil)
	_ adapter.Reconfigurer   = (*instance)(nil)
	_ adapter.SessionManager = (*instance)(nil)
	_ adapter.Factory        = New
)

// New builds a cli adapter instance. It reports every problem of cfg and env
// at once. env.WorkspaceRoot and env.StoreDir are required; the root is
// created on first use if missing.
func New(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
	c, err := parseConfig(cfg)
	errs := []error{err}
	if env.WorkspaceRoot == "" {
		errs = append(errs, fieldErr("workspace_root", "is required for cli adapters"))
	}
	if env.StoreDir == "" {
		errs = append(errs, fieldErr("store_dir", "is required for cli adapters"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cli: invalid config: %w", err)
	}
	root, err := filepath.Abs(env.WorkspaceRoot)
	if err != nil {
		return nil, fmt.Errorf("cli: workspace root: %w", err)
	}
	store, err := filepath.Abs(env.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("cli: store dir: %w", err)
	}
	a := &instance{
		name:          c.name,
		workspaceRoot: root,
		storeDir:      store,
		getenv:        env.Getenv,
		log:           env.Logger,
		cfg:           c,
		sessions:      make(map[string]*session),
	}
	a.idle.prev, a.idle.next = &a.idle, &a.idle
	if a.getenv == nil {
		a.getenv = os.Getenv
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	a.log = a.log.With(zap.String("adapter", a.name))
	if err := protectNode(); err != nil {
		a.log.Warn("cli: the node's environment stays readable to its CLIs", zap.Error(err))
	}
	return a, nil
}

// Reconfigure applies a new command, timeout and settings. Runs in flight
// keep the config they started with; sessions are kept. The instance name
// cannot change, since it locates the session state.
func (a *instance) Reconfigure(cfg *iop.AdapterConfig) error {
	c, err := parseConfig(cfg)
	if err != nil {
		return fmt.Errorf("cli: invalid config: %w", err)
	}
	if c.name != a.name {
		return fmt.Errorf("cli: invalid config: %w", fieldErr("name", "cannot change from %q to %q", a.name, c.name))
	}
	a.mu.Lock()
	a.cfg = c
	a.mu.Unlock()
	return nil
}

func (a *instance) config() *config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// Tunnel is not supported: a CLI has no HTTP surface.
func (a *instance) Tunnel(context.Context, *iop.ProviderTunnelRequest, adapter.TunnelSink) error {
	return adapter.ErrUnsupported
}

// Close has nothing to release: runs own their processes and sessions
// persist on disk.
func (a *instance) Close() error { return nil }

// Capabilities: a CLI agent serves chat and completion as normalized runs,
// its stdout streamed as deltas.
func (a *instance) Capabilities() *iop.AdapterCapabilities {
	c := adapter.DefaultCapabilities()
	c.Streaming, c.Category = true, adapter.CategoryCLI
	return c
}

// Run executes one CLI run. See the package documentation.
func (a *instance) Run(ctx context.Context, req *iop.RunRequest, sink adapter.RunSink) (*adapter.Result, error) {
	cfg := a.config()
	op := req.GetOperation()
	switch op {
	case adapter.OpChat, adapter.OpCompletion:
	default:
		return nil, &adapter.Error{Code: adapter.CodeUnsupported, Message: fmt.Sprintf("cli adapter does not support operation %s", op)}
	}
	in, err := parseInput(op, req.GetInput())
	if err != nil {
		return nil, err
	}
	sid := req.GetSessionId()
	if sid != "" {
		if err := validateSessionID(sid); err != nil {
			return nil, err
		}
		if strings.HasPrefix(sid, "-") {
			// "{session}" may make the id an argv element of its own,
			// which the CLI would read as an option (one that turns
			// off its permission checks, say): the client must not
			// choose the CLI's options.
			return nil, invalidRequest(`session id must not start with "-"`)
		}
	}
	dir, err := resolveWorkspace(a.workspaceRoot, req.GetWorkspace())
	if err != nil {
		return nil, err
	}
	path, err := lookPath(cfg.argv[0])
	if err != nil {
		return nil, err
	}
	spec := &procSpec{
		path:          path,
		argv:          slices.Clone(cfg.argv),
		dir:           dir,
		env:           childEnv(cfg.envAllow, a.getenv),
		timeout:       cfg.timeout,
		killGrace:     cfg.killGrace,
		maxStderr:     cfg.maxStderr,
		captureRe:     cfg.sessionIDRe,
		captureStderr: cfg.sessionStderr,
	}
	if t := req.GetTimeoutSec(); t > 0 {
		spec.timeout = time.Duration(t) * time.Second
	}
	log := a.log.With(zap.String("run_id", req.GetRunId()))
	if sid == "" {
		if spec.stdin, err = in.render(false); err != nil {
			return nil, err
		}
		return a.execute(ctx, spec, sink, log)
	}
	return a.runSession(ctx, cfg, sid, in, spec, sink, log.With(zap.String("session_id", sid)))
}

// runSession runs spec as the next run of session sid.
func (a *instance) runSession(ctx context.Context, cfg *config, sid string, in *runInput, spec *procSpec, sink adapter.RunSink, log *zap.Logger) (*adapter.Result, error) {
	s, err := a.acquireSession(ctx, sid)
	if err != nil {
		return nil, err
	}
	defer a.releaseSession(s)

	st := a.loadState(s)
	resume := st.established(cfg.sessionIDRe != nil)
	if spec.stdin, err = in.render(resume); err != nil {
		return nil, err
	}
	ref := st.UpstreamID
	if ref == "" {
		ref = sid
	}
	extra := cfg.sessionArgs
	if resume {
		extra = cfg.resumeArgs
	}
	spec.argv = append(spec.argv, expandArgs(extra, ref, sessionUUID(a.name, sid, st.FailedStarts))...)

	stop, ok := a.registerRun(s)
	if !ok {
		return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "cli session was terminated"}
	}
	spec.terminate = stop
	out, runErr := runProcess(ctx, spec, sink)
	a.noteUnguarded(out.guardErr)
	persisted := false
	if out.pid != 0 {
		// The CLI ran, so it may have created or advanced its session:
		// record it. Only a success establishes the session.
		now := time.Now().Unix()
		if st.CreatedUnix == 0 {
			st.CreatedUnix = now
		}
		st.LastUsedUnix = now
		if runErr == nil {
			st.Runs++
			if out.upstreamID != "" {
				st.UpstreamID = out.upstreamID
			}
		} else if !resume {
			st.FailedStarts++
		}
		if err := writeState(s.dir, &st); err != nil {
			// The answer is already out; only continuation suffers.
			log.Error("cli: save session state", zap.Error(err))
		} else {
			persisted = true
		}
	}
	a.unregisterRun(s, persisted)
	log.Debug("cli run finished", zap.Int("pid", out.pid), zap.Int("exit_code", out.exitCode),
		zap.Bool("resumed", resume), zap.Bool("upstream_id_captured", out.upstreamID != ""), zap.Error(runErr))
	if runErr != nil {
		return nil, runErr
	}
	return &adapter.Result{FinishReason: "stop"}, nil
}

// execute runs spec without a session.
func (a *instance) execute(ctx context.Context, spec *procSpec, sink adapter.RunSink, log *zap.Logger) (*adapter.Result, error) {
	out, err := runProcess(ctx, spec, sink)
	a.noteUnguarded(out.guardErr)
	log.Debug("cli run finished", zap.Int("pid", out.pid), zap.Int("exit_code", out.exitCode), zap.Error(err))
	if err != nil {
		return nil, err
	}
	return &adapter.Result{FinishReason: "stop"}, nil
}

// lookPath resolves the program to an absolute path. A program found through
// a relative PATH entry is refused (exec.ErrDot): which binary runs would
// depend on the Node's working directory.
func lookPath(prog string) (string, error) {
	p, err := exec.LookPath(prog)
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		return "", &adapter.Error{Code: adapter.CodeUpstream, Message: fmt.Sprintf("cli command %q not found", prog), Err: err}
	}
	return p, nil
}

// childEnv builds the complete child environment from the allow-list. The
// result is never nil: a nil Cmd.Env would inherit the Node's environment.
func childEnv(allow []string, getenv func(string) string) []string {
	env := make([]string, 0, len(allow))
	for _, k := range allow {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}
