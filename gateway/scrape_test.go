package gateway_test

import (
	"net"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/iop-gateway/iop/config"
)

// Every edge docker-compose.yml runs (the cluster profile's too) is scraped
// by configs/prometheus.yml at the port its config serves /metrics on, so
// the dashboard sees each of them.
func TestPrometheusScrapesEveryComposeEdge(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	readYAMLFile(t, "../docker-compose.yml", &compose)
	var prom struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAMLFile(t, "../configs/prometheus.yml", &prom)
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			continue
		}
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	t.Setenv("IOP_COMPOSE_NODE_TOKEN", "scrape-test-token")
	edges := 0
	for name, svc := range compose.Services {
		if len(svc.Command) < 3 || svc.Command[0] != "iop-edge" || svc.Command[1] != "--config" {
			continue
		}
		edges++
		file := hostPath(t, svc.Volumes, svc.Command[2])
		cfg, err := config.LoadEdge(file)
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		_, port, err := net.SplitHostPort(cfg.Listen.HTTP)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(targets, name+":"+port) {
			t.Errorf("service %s serves /metrics on %s:%s, which configs/prometheus.yml does not scrape (targets %v)", name, name, port, targets)
		}
	}
	if edges < 2 {
		t.Fatalf("%d iop-edge services in docker-compose.yml", edges)
	}
}

func readYAMLFile(t *testing.T, file string, out any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// hostPath maps a path inside a compose container to the repository file
// its volumes mount there.
func hostPath(t *testing.T, volumes []string, inside string) string {
	t.Helper()
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue
		}
		if rel, ok := strings.CutPrefix(inside, parts[1]+"/"); ok {
			return path.Join("..", parts[0], rel)
		}
	}
	t.Fatalf("%s is not mounted from the repository (volumes %v)", inside, volumes)
	return ""
}
