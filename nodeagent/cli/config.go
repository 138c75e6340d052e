package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Settings keys (AdapterConfig.settings) understood by the cli adapter. Any
// other key is rejected so that a typo cannot silently disable, say, session
// resumption.
const (
	// Names of Node environment variables passed to the CLI in addition to
	// baseEnvAllow, comma-separated or as a JSON array. Nothing else is
	// passed.
	SettingEnvAllow = "env_allow"
	// JSON array of argv elements appended when a run continues an
	// established session (see the package documentation for placeholders).
	SettingResumeArgs = "resume_args"
	// JSON array of argv elements appended on the first run of a session.
	SettingSessionArgs = "session_args"
	// Regular expression with at least one capture group; group 1 captures
	// the CLI's own session id from its output.
	SettingSessionIDRegex = "session_id_regex"
	// Which output session_id_regex is matched against: stdout (default) or
	// stderr.
	SettingSessionIDStream = "session_id_stream"
	// How much of the tail of stderr is kept for error messages.
	SettingMaxStderrBytes = "max_stderr_bytes"
	// Delay between SIGTERM and SIGKILL when a run is stopped. 0 sends
	// SIGKILL straight away.
	SettingKillGraceMS = "kill_grace_ms"
	// How many sessions the instance keeps (in memory and under the
	// store). A new session beyond it evicts the least recently used
	// session that no run holds or waits for; if every session has one,
	// the new session is refused (capacity_exceeded). Between 1 and
	// maxMaxSessions; there is no unlimited.
	SettingMaxSessions = "max_sessions"
)

const (
	defaultMaxStderrBytes = 64 << 10
	// An upper bound keeps a misconfiguration from pinning memory per run
	// and from producing error messages too large for the wire.
	maxMaxStderrBytes = 1 << 20
	defaultKillGrace  = 2 * time.Second
	maxKillGrace      = time.Minute
	// How much of stdout/stderr is kept for session id capture.
	captureWindow = 64 << 10
	// A session costs a few hundred bytes of memory and a directory with
	// one small file; loading 20,000 of them at first use takes about
	// 1.5 s. The upper bound keeps that first use in seconds.
	defaultMaxSessions = 1000
	maxMaxSessions     = 100_000
)

// baseEnvAllow is always passed through (when set on the Node): the minimum a
// CLI needs to find its tools (PATH), its own state and credentials (HOME)
// and to decode text (LANG). TERM is deliberately absent: the CLI does not
// run on a terminal.
var baseEnvAllow = []string{"HOME", "LANG", "PATH"}

var (
	envNameRe      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	instanceNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// config is the validated, immutable form of an AdapterConfig. Runs take a
// snapshot of it, so Reconfigure never changes a run half-way.
type config struct {
	name          string
	argv          []string
	timeout       time.Duration // 0: none
	envAllow      []string      // sorted, deduplicated, includes baseEnvAllow
	sessionArgs   []string
	resumeArgs    []string
	sessionIDRe   *regexp.Regexp // nil: the iop session id is used upstream
	sessionStderr bool           // match sessionIDRe against stderr
	maxStderr     int
	killGrace     time.Duration
	maxSessions   int
}

// configError names the config field a problem belongs to, so callers (and
// tests) can tell problems apart without parsing messages.
type configError struct {
	field string
	err   error
}

func (e *configError) Error() string { return e.field + ": " + e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

func fieldErr(field, format string, args ...any) error {
	return &configError{field: field, err: fmt.Errorf(format, args...)}
}

// instanceName is the instance's stable identity; an empty name means the
// legacy single-instance name, the type name.
func instanceName(cfg *iop.AdapterConfig) string {
	if cfg.GetName() == "" {
		return Type
	}
	return cfg.GetName()
}

// parseConfig validates cfg and returns every problem it finds, joined.
func parseConfig(cfg *iop.AdapterConfig) (*config, error) {
	if cfg == nil {
		return nil, fieldErr("config", "missing")
	}
	var errs []error
	c := &config{
		name:        instanceName(cfg),
		maxStderr:   defaultMaxStderrBytes,
		killGrace:   defaultKillGrace,
		maxSessions: defaultMaxSessions,
	}
	if t := cfg.GetType(); t != "" && t != Type {
		errs = append(errs, fieldErr("type", "is %q, want %q", t, Type))
	}
	if !instanceNameRe.MatchString(c.name) {
		// The name becomes a directory under the store: keep it boring.
		errs = append(errs, fieldErr("name", "must match %s", instanceNameRe))
	}
	c.argv, errs = parseCommand(cfg.GetCommand(), errs)
	switch ts := cfg.GetTimeoutSec(); {
	case ts < 0:
		errs = append(errs, fieldErr("timeout_sec", "must not be negative"))
	default:
		c.timeout = time.Duration(ts) * time.Second
	}
	c.envAllow = slices.Clone(baseEnvAllow)

	// Sorted keys make the joined error deterministic.
	keys := make([]string, 0, len(cfg.GetSettings()))
	for k := range cfg.GetSettings() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var stream string
	for _, k := range keys {
		v := cfg.GetSettings()[k]
		field := "settings." + k
		switch k {
		case SettingEnvAllow:
			names, err := parseNameList(v)
			if err != nil {
				errs = append(errs, &configError{field: field, err: err})
			}
			for _, name := range names {
				if !envNameRe.MatchString(name) {
					errs = append(errs, fieldErr(field, "%q is not a valid environment variable name", name))
					continue
				}
				c.envAllow = append(c.envAllow, name)
			}
		case SettingResumeArgs:
			args, err := parseArgs(v)
			if err != nil {
				errs = append(errs, &configError{field: field, err: err})
			}
			c.resumeArgs = args
		case SettingSessionArgs:
			args, err := parseArgs(v)
			if err != nil {
				errs = append(errs, &configError{field: field, err: err})
			}
			c.sessionArgs = args
		case SettingSessionIDRegex:
			re, err := regexp.Compile(v)
			switch {
			case err != nil:
				errs = append(errs, &configError{field: field, err: err})
			case re.NumSubexp() < 1:
				errs = append(errs, fieldErr(field, "needs a capture group for the session id"))
			default:
				c.sessionIDRe = re
			}
		case SettingSessionIDStream:
			stream = v
			switch v {
			case "", "stdout":
			case "stderr":
				c.sessionStderr = true
			default:
				errs = append(errs, fieldErr(field, "is %q, want stdout or stderr", v))
			}
		case SettingMaxStderrBytes:
			n, err := strconv.Atoi(strings.TrimSpace(v))
			switch {
			case err != nil:
				errs = append(errs, fieldErr(field, "is not an integer"))
			case n < 1 || n > maxMaxStderrBytes:
				errs = append(errs, fieldErr(field, "must be between 1 and %d", maxMaxStderrBytes))
			default:
				c.maxStderr = n
			}
		case SettingKillGraceMS:
			n, err := strconv.Atoi(strings.TrimSpace(v))
			switch {
			case err != nil:
				errs = append(errs, fieldErr(field, "is not an integer"))
			case n < 0 || time.Duration(n)*time.Millisecond > maxKillGrace:
				errs = append(errs, fieldErr(field, "must be between 0 and %d", maxKillGrace.Milliseconds()))
			default:
				c.killGrace = time.Duration(n) * time.Millisecond
			}
		case SettingMaxSessions:
			n, err := strconv.Atoi(strings.TrimSpace(v))
			switch {
			case err != nil:
				errs = append(errs, fieldErr(field, "is not an integer"))
			case n < 1 || n > maxMaxSessions:
				errs = append(errs, fieldErr(field, "must be between 1 and %d", maxMaxSessions))
			default:
				c.maxSessions = n
			}
		default:
			errs = append(errs, fieldErr(field, "unknown setting"))
		}
	}
	if stream != "" && c.sessionIDRe == nil {
		errs = append(errs, fieldErr("settings."+SettingSessionIDStream, "set without %s", SettingSessionIDRegex))
	}
	slices.Sort(c.envAllow)
	c.envAllow = slices.Compact(c.envAllow)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

func parseCommand(cmd []string, errs []error) ([]string, []error) {
	if len(cmd) == 0 {
		return nil, append(errs, fieldErr("command", "is required"))
	}
	if cmd[0] == "" {
		errs = append(errs, fieldErr("command", "program (element 0) is empty"))
	}
	for i, a := range cmd {
		// execve cannot carry a NUL; catch it here rather than at every run.
		if strings.IndexByte(a, 0) >= 0 {
			errs = append(errs, fieldErr("command", "element %d contains a NUL byte", i))
		}
	}
	return slices.Clone(cmd), errs
}

// parseNameList splits a comma-separated list. A JSON array of strings is
// accepted too: that is how the Edge forwards a YAML list.
func parseNameList(v string) ([]string, error) {
	if strings.HasPrefix(strings.TrimSpace(v), "[") {
		var names []string
		if err := json.Unmarshal([]byte(v), &names); err != nil {
			return nil, errors.New("must be a comma-separated list or a JSON array of strings")
		}
		return names, nil
	}
	var names []string
	for name := range strings.SplitSeq(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}

// parseArgs decodes a JSON array of strings.
func parseArgs(v string) ([]string, error) {
	var args []string
	if err := json.Unmarshal([]byte(v), &args); err != nil {
		return nil, errors.New("must be a JSON array of strings")
	}
	for i, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("element %d contains a NUL byte", i)
		}
	}
	return args, nil
}
