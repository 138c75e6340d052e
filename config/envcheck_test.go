package config

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// captureStderr runs f with os.Stderr (and os.Stdout) going to files and
// returns what was written to each. Not parallel: it swaps process globals.
func captureStderr(t *testing.T, f func()) (stderr, stdout string) {
	t.Helper()
	dir := t.TempDir()
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	oldErr, oldOut := os.Stderr, os.Stdout
	os.Stderr, os.Stdout = errF, outF
	defer func() { os.Stderr, os.Stdout = oldErr, oldOut }()
	f()
	_ = errF.Close()
	_ = outF.Close()
	e, _ := os.ReadFile(errF.Name())
	o, _ := os.ReadFile(outF.Name())
	return string(e), string(o)
}

// An IOP_* variable that overrides no key (a typo) is reported by name,
// for the edge and the node; the keys' own variables, variables a *_env
// key names and the image's IOP_HEALTHCHECK_URL are not.
func TestUnmatchedEnvReported(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase+"cluster: {redis: {address: 'r:6379', password_env: IOP_REDIS_PW}}\n")
	t.Setenv("IOP_LISTEN_HTTPS", "value-SECRET")
	t.Setenv("IOP_AUTH_API_KEY", "sk-SECRET")
	t.Setenv("IOP_LISTEN_HTTP", "127.0.0.1:9999")
	t.Setenv("IOP_CORS_ALLOWED_ORIGINS", "https://a.example")
	t.Setenv("IOP_HEALTHCHECK_URL", "http://x/healthz")
	t.Setenv("IOP_REDIS_PW", "pw")
	t.Setenv("IOP_NODESS", "x") // a typo of a list key's variable
	c, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.UnmatchedEnv(), []string{"IOP_AUTH_API_KEY", "IOP_LISTEN_HTTPS", "IOP_NODESS"}; !slices.Equal(got, want) {
		t.Errorf("edge: unmatched %v, want %v", got, want)
	}
	if c.Listen.HTTP != "127.0.0.1:9999" {
		t.Errorf("listen.http %q", c.Listen.HTTP)
	}

	nf := writeFile(t, "node.yaml", "edge: {address: 'e:7070'}\nnode: {id: a, token_env: IOP_MY_NODE_TOKEN}\n")
	t.Setenv("IOP_MY_NODE_TOKEN", "tok")
	t.Setenv("IOP_EDGE_ADRESS", "e2:7070")
	n, err := LoadNode(nf)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"IOP_AUTH_API_KEY", "IOP_CORS_ALLOWED_ORIGINS", "IOP_EDGE_ADRESS", "IOP_LISTEN_HTTP", "IOP_LISTEN_HTTPS", "IOP_NODESS", "IOP_REDIS_PW"}
	if got := n.UnmatchedEnv(); !slices.Equal(got, want) {
		t.Errorf("node: unmatched %v, want %v", got, want)
	}
}

// None set: nil, so that a reload comparing the log section sees no
// change against a config built in code.
func TestUnmatchedEnvNoneIsNil(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	c, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.UnmatchedEnv() != nil && !hasIOPEnv() {
		t.Errorf("unmatched %#v", c.UnmatchedEnv())
	}
}

func hasIOPEnv() bool {
	return slices.ContainsFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envPrefix) })
}

// The logger warns of each, by name, never the value, as its first lines.
func TestUnmatchedEnvLoggedAtBuild(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_LISTEN_HTTPS", "value-SECRET")
	c, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	stderr, _ := captureStderr(t, func() {
		log, err := c.Log.Build()
		if err != nil {
			t.Fatal(err)
		}
		_ = log.Sync()
	})
	if !strings.Contains(stderr, `"variable":"IOP_LISTEN_HTTPS"`) || !strings.Contains(stderr, `"level":"warn"`) || strings.Contains(stderr, "SECRET") {
		t.Errorf("log: %s", stderr)
	}
}

// --check-config prints a warning line per variable and keeps its verdict:
// ok and exit 0 for a good config, the problems and 2 for a bad one.
func TestCheckConfigWarnsOfUnmatchedEnv(t *testing.T) {
	t.Setenv("IOP_LISTEN_HTTPS", "value-SECRET")
	run := func(file string) (code int, stderr, stdout string) {
		oldFlags, oldArgs := flag.CommandLine, os.Args
		defer func() { flag.CommandLine, os.Args = oldFlags, oldArgs }()
		flag.CommandLine = flag.NewFlagSet("iop-edge", flag.ContinueOnError)
		os.Args = []string{"iop-edge", "--check-config", file}
		stderr, stdout = captureStderr(t, func() { _, _, code = FromFlags("unused.yaml", LoadEdge) })
		return code, stderr, stdout
	}
	warning := "warning: environment variable IOP_LISTEN_HTTPS overrides no config key"
	good := writeFile(t, "edge.yaml", decodeBase)
	code, stderr, stdout := run(good)
	if code != 0 || !strings.Contains(stdout, ": ok") || !strings.Contains(stderr, warning) || strings.Contains(stderr+stdout, "SECRET") {
		t.Errorf("good: %d %q %q", code, stderr, stdout)
	}
	bad := writeFile(t, "edge.yaml", decodeBase+"limits: {max_body_bytes: -1}\n")
	code, stderr, _ = run(bad)
	if code != 2 || !strings.Contains(stderr, "limits.max_body_bytes must be positive") || !strings.Contains(stderr, warning) {
		t.Errorf("bad: %d %q", code, stderr)
	}
}
