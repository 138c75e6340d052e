package deploytest

// Checks that need Docker: they skip, saying why, where no engine or no
// compose implementation exists (the static checks in deploy_test.go run
// everywhere).

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func run(t *testing.T, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestDockerImageBuilds(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker client on PATH; the image build is checked where Docker exists")
	}
	if out, err := run(t, 30*time.Second, "docker", "info"); err != nil {
		t.Skipf("no Docker engine (docker info: %v); the image build is checked where one runs:\n%s", err, lastLines(out, 3))
	}
	const tag = "iop:deploytest"
	if out, err := run(t, 12*time.Minute, "docker", "build", "-t", tag, "."); err != nil {
		t.Fatalf("docker build: %v\n%s", err, lastLines(out, 40))
	}
	t.Cleanup(func() { _, _ = run(t, time.Minute, "docker", "rmi", "-f", tag) })
	for _, args := range [][]string{
		{"iop-edge", "--check-config", "/etc/iop/edge.yaml"},
		{"iop-node", "--check-config", "/etc/iop/node.yaml"},
	} {
		full := append([]string{"run", "--rm", "-e", "IOP_COMPOSE_NODE_TOKEN=t", tag}, args...)
		if out, err := run(t, 2*time.Minute, "docker", full...); err != nil {
			t.Errorf("docker run %v: %v\n%s", args, err, out)
		}
	}
	if out, err := run(t, time.Minute, "docker", "run", "--rm", "--entrypoint", "id", tag, "-u"); err != nil || strings.TrimSpace(out) == "0" {
		t.Errorf("image runs as uid %q (%v), want non-root", strings.TrimSpace(out), err)
	}
}

func TestComposeConfigValid(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker client on PATH; `docker compose config` is checked where the compose plugin exists")
	}
	if out, err := run(t, 30*time.Second, "docker", "compose", "version"); err != nil {
		// A standalone docker-compose (v1 too) still validates the file.
		if _, lerr := exec.LookPath("docker-compose"); lerr == nil {
			if out, err := run(t, time.Minute, "docker-compose", "-f", "docker-compose.yml", "config", "-q"); err != nil {
				t.Fatalf("docker-compose config: %v\n%s", err, out)
			}
			t.Skip("validated with standalone docker-compose; the profile checks need the compose plugin")
		}
		t.Skipf("no docker compose plugin (%v); `docker compose config` is checked where it exists:\n%s", err, lastLines(out, 3))
	}
	if out, err := run(t, time.Minute, "docker", "compose", "-f", "docker-compose.yml", "config", "-q"); err != nil {
		t.Fatalf("docker compose config: %v\n%s", err, out)
	}
	plain, err := run(t, time.Minute, "docker", "compose", "-f", "docker-compose.yml", "config", "--services")
	if err != nil {
		t.Fatal(err)
	}
	withOllama, err := run(t, time.Minute, "docker", "compose", "-f", "docker-compose.yml", "--profile", "ollama", "config", "--services")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(strings.Fields(plain), "ollama") || !slices.Contains(strings.Fields(withOllama), "ollama") {
		t.Errorf("ollama must run only under its profile: default %q, --profile ollama %q", plain, withOllama)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
