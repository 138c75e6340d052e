package cli

import (
	"slices"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// problemFields collects the field of every configError in err's tree.
func problemFields(err error) []string {
	var fields []string
	var walk func(error)
	walk = func(e error) {
		if ce, ok := e.(*configError); ok {
			fields = append(fields, ce.field)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	slices.Sort(fields)
	return fields
}

func TestNewReportsEveryProblem(t *testing.T) {
	cfg := &iop.AdapterConfig{
		Name:       "../escape",
		Type:       "vllm",
		TimeoutSec: -1,
		Settings: map[string]string{
			SettingEnvAllow:        "GOOD, 1BAD",
			SettingResumeArgs:      "--resume {session}",
			SettingSessionArgs:     `[1]`,
			SettingSessionIDRegex:  "(",
			SettingSessionIDStream: "stdin",
			SettingMaxStderrBytes:  "0",
			SettingKillGraceMS:     "soon",
			"bogus":                "x",
		},
	}
	inst, err := New(cfg, adapter.Env{})
	if err == nil || inst != nil {
		t.Fatalf("New = %v, %v; want an error", inst, err)
	}
	want := []string{
		"command", "name", "settings.bogus", "settings.env_allow", "settings.kill_grace_ms",
		"settings.max_stderr_bytes", "settings.resume_args", "settings.session_args",
		"settings.session_id_regex", "settings.session_id_stream", "store_dir", "timeout_sec", "type",
		"workspace_root",
	}
	// session_id_stream appears twice: invalid, and set without a regex.
	got := slices.Compact(problemFields(err))
	if !slices.Equal(got, want) {
		t.Fatalf("problems = %q\nwant       %q\nerror: %v", got, want, err)
	}
}

func TestParseConfigRejects(t *testing.T) {
	base := func() *iop.AdapterConfig { return &iop.AdapterConfig{Command: []string{"claude"}} }
	for name, tc := range map[string]struct {
		mod   func(*iop.AdapterConfig)
		field string
	}{
		"nil":             {nil, "config"},
		"empty program":   {func(c *iop.AdapterConfig) { c.Command = []string{"", "-p"} }, "command"},
		"nul in argv":     {func(c *iop.AdapterConfig) { c.Command = []string{"claude", "a\x00b"} }, "command"},
		"regex no group":  {func(c *iop.AdapterConfig) { c.Settings = map[string]string{SettingSessionIDRegex: `id=\S+`} }, "settings.session_id_regex"},
		"stderr too big":  {func(c *iop.AdapterConfig) { c.Settings = map[string]string{SettingMaxStderrBytes: "99999999"} }, "settings.max_stderr_bytes"},
		"grace too long":  {func(c *iop.AdapterConfig) { c.Settings = map[string]string{SettingKillGraceMS: "600000"} }, "settings.kill_grace_ms"},
		"negative grace":  {func(c *iop.AdapterConfig) { c.Settings = map[string]string{SettingKillGraceMS: "-1"} }, "settings.kill_grace_ms"},
		"args not array":  {func(c *iop.AdapterConfig) { c.Settings = map[string]string{SettingResumeArgs: `{"a":1}`} }, "settings.resume_args"},
		"env name spaces": {func(c *iop.AdapterConfig) { c.Settings = map[string]string{SettingEnvAllow: "A B"} }, "settings.env_allow"},
		"env bad json":    {func(c *iop.AdapterConfig) { c.Settings = map[string]string{SettingEnvAllow: "[1]"} }, "settings.env_allow"},
	} {
		t.Run(name, func(t *testing.T) {
			var cfg *iop.AdapterConfig
			if tc.mod != nil {
				cfg = base()
				tc.mod(cfg)
			}
			_, err := parseConfig(cfg)
			if got := problemFields(err); !slices.Equal(got, []string{tc.field}) {
				t.Fatalf("problems = %q, want [%s] (error: %v)", got, tc.field, err)
			}
		})
	}
}

func TestParseConfigDefaultsAndValues(t *testing.T) {
	c, err := parseConfig(&iop.AdapterConfig{Command: []string{"claude", "-p"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.name != Type || c.maxStderr != 64<<10 || c.killGrace != 2*time.Second || c.timeout != 0 || c.sessionIDRe != nil {
		t.Fatalf("defaults = %+v", c)
	}
	if !slices.Equal(c.envAllow, []string{"HOME", "LANG", "PATH"}) {
		t.Fatalf("default env allow-list = %q", c.envAllow)
	}

	c, err = parseConfig(&iop.AdapterConfig{
		Name: "claude-main", Type: Type, Command: []string{"claude"}, TimeoutSec: 90,
		Settings: map[string]string{
			SettingEnvAllow:        `["ANTHROPIC_API_KEY", "PATH", "HTTPS_PROXY"]`,
			SettingResumeArgs:      `["--resume","{session}"]`,
			SettingSessionIDRegex:  `id: (\S+)`,
			SettingSessionIDStream: "stderr",
			SettingMaxStderrBytes:  "100",
			SettingKillGraceMS:     "0",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ANTHROPIC_API_KEY", "HOME", "HTTPS_PROXY", "LANG", "PATH"}; !slices.Equal(c.envAllow, want) {
		t.Fatalf("envAllow = %q, want %q", c.envAllow, want)
	}
	if c.name != "claude-main" || c.timeout != 90*time.Second || c.maxStderr != 100 || c.killGrace != 0 ||
		!c.sessionStderr || c.sessionIDRe == nil || !slices.Equal(c.resumeArgs, []string{"--resume", "{session}"}) {
		t.Fatalf("config = %+v", c)
	}
}

func TestReconfigure(t *testing.T) {
	env := adapter.Env{WorkspaceRoot: t.TempDir(), StoreDir: t.TempDir()}
	raw, err := New(&iop.AdapterConfig{Name: "a", Command: []string{"one"}}, env)
	if err != nil {
		t.Fatal(err)
	}
	inst := raw.(*instance)
	rc := adapter.Reconfigurer(inst)

	settings := map[string]string{SettingKillGraceMS: "10"}
	if err := rc.Reconfigure(&iop.AdapterConfig{Name: "a", Command: []string{"two", "x"}, TimeoutSec: 5, Settings: settings}); err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}
	settings["kill_grace_ms"] = "20" // the instance must not alias the caller's map
	c := inst.config()
	if !slices.Equal(c.argv, []string{"two", "x"}) || c.timeout != 5*time.Second || c.killGrace != 10*time.Millisecond {
		t.Fatalf("after Reconfigure = %+v", c)
	}

	if err := rc.Reconfigure(&iop.AdapterConfig{Name: "b", Command: []string{"three"}}); !slices.Equal(problemFields(err), []string{"name"}) {
		t.Fatalf("rename: err = %v", err)
	}
	if err := rc.Reconfigure(&iop.AdapterConfig{Name: "a"}); !slices.Equal(problemFields(err), []string{"command"}) {
		t.Fatalf("invalid: err = %v", err)
	}
	if got := inst.config(); !slices.Equal(got.argv, []string{"two", "x"}) {
		t.Fatalf("a rejected config was applied: %q", got.argv)
	}
}
