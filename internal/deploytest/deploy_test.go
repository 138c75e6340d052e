package deploytest

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/iop-gateway/iop/config"
)

// root is the repository root, relative to this package.
const root = "../.."

func path(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

func readYAML(t *testing.T, rel string, out any) {
	t.Helper()
	b, err := os.ReadFile(path(rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// service is the part of a compose service these checks read.
type service struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Profiles    []string          `yaml:"profiles"`
	DependsOn   any               `yaml:"depends_on"`
	StopGrace   string            `yaml:"stop_grace_period"`
}

type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	var c compose
	readYAML(t, "docker-compose.yml", &c)
	return c
}

// mount returns the host side of the service's bind mount at target.
func (s service) mount(target string) (string, bool) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return parts[0], true
		}
	}
	return "", false
}

// hostFile maps a container path to the repository file behind a bind mount.
func (s service) hostFile(t *testing.T, container string) string {
	t.Helper()
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue
		}
		if container == parts[1] {
			return parts[0]
		}
		if rest, ok := strings.CutPrefix(container, parts[1]+"/"); ok {
			return parts[0] + "/" + rest
		}
	}
	t.Fatalf("%s is not under any bind mount of %v", container, s.Volumes)
	return ""
}

func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"edge", "node", "ollama", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("service %q missing; have %v", name, c.Services)
		}
	}
	for name, s := range c.Services {
		if (name == "ollama") != slices.Equal(s.Profiles, []string{"ollama"}) {
			t.Errorf("%s: profiles %v (only ollama is optional, under profile \"ollama\")", name, s.Profiles)
		}
		for _, v := range s.Volumes {
			if host := strings.Split(v, ":")[0]; strings.HasPrefix(host, "./") {
				if _, err := os.Stat(path(host)); err != nil {
					t.Errorf("%s: bind mount source %s: %v", name, host, err)
				}
			} else if _, ok := c.Volumes[host]; !ok {
				t.Errorf("%s: volume %q is not declared", name, host)
			}
		}
	}
	edge, node := c.Services["edge"], c.Services["node"]
	for name, want := range map[string]string{"edge": "iop-edge", "node": "iop-node"} {
		s := c.Services[name]
		if s.Build == nil || s.Image == "" {
			t.Errorf("%s: builds the Dockerfile's image (build + image), got build %v image %q", name, s.Build, s.Image)
		}
		if len(s.Command) != 3 || s.Command[0] != want || s.Command[1] != "--config" {
			t.Errorf("%s: command %v, want [%s --config FILE]", name, s.Command, want)
			continue
		}
		if _, err := os.Stat(path(s.hostFile(t, s.Command[2]))); err != nil {
			t.Errorf("%s: config %s: %v", name, s.Command[2], err)
		}
	}
	if edge.Image != node.Image {
		t.Errorf("edge and node run different images: %q, %q", edge.Image, node.Image)
	}
	if !slices.ContainsFunc(edge.Ports, func(p string) bool { return strings.HasSuffix(p, "8080:8080") }) {
		t.Errorf("edge ports %v do not publish 8080", edge.Ports)
	}
	if deps, _ := json.Marshal(node.DependsOn); !strings.Contains(string(deps), `"edge"`) {
		t.Errorf("node depends_on %s, want edge", deps)
	}
	if !strings.HasPrefix(c.Services["ollama"].Image, "ollama/ollama") {
		t.Errorf("ollama image %q", c.Services["ollama"].Image)
	}
	prom := c.Services["prometheus"]
	if !strings.HasPrefix(prom.Image, "prom/prometheus") {
		t.Errorf("prometheus image %q", prom.Image)
	}
	if host, ok := prom.mount("/etc/prometheus/prometheus.yml"); !ok || host != "./configs/prometheus.yml" {
		t.Errorf("prometheus mounts %q at /etc/prometheus/prometheus.yml, want ./configs/prometheus.yml", host)
	}
	g := c.Services["grafana"]
	if !strings.HasPrefix(g.Image, "grafana/grafana") {
		t.Errorf("grafana image %q", g.Image)
	}
	if g.Environment["GF_AUTH_ANONYMOUS_ENABLED"] != "true" || g.Environment["GF_AUTH_ANONYMOUS_ORG_ROLE"] != "Viewer" {
		t.Errorf("grafana: anonymous viewer not enabled: %v", g.Environment)
	}
	if host, ok := g.mount("/etc/grafana/provisioning"); !ok || host != "./configs/grafana/provisioning" {
		t.Errorf("grafana provisioning mount %q", host)
	}
	// Every secret the configs read from the environment is passed in.
	for name, vars := range map[string][]string{"edge": {"IOP_COMPOSE_NODE_TOKEN"}, "node": {"IOP_COMPOSE_NODE_TOKEN"}} {
		for _, v := range vars {
			if _, ok := c.Services[name].Environment[v]; !ok {
				t.Errorf("%s: environment lacks %s", name, v)
			}
		}
	}
}

func hostPort(t *testing.T, addr string) (string, string) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return h, p
}

// The compose configs pass the binaries' own validation and agree with
// each other and with the compose service names.
func TestComposeConfigsValidate(t *testing.T) {
	t.Setenv("IOP_COMPOSE_NODE_TOKEN", "deploytest-token")
	edge, err := config.LoadEdge(path("configs/compose/edge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := config.LoadNode(path("configs/compose/node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := loadCompose(t)

	if h, p := hostPort(t, edge.Listen.HTTP); h != "0.0.0.0" || p != "8080" {
		t.Errorf("edge listen.http %s: must listen on all interfaces of the container, port 8080", edge.Listen.HTTP)
	}
	_, wirePort := hostPort(t, edge.Listen.Node)
	if h, p := hostPort(t, node.Edge.Address); h != "edge" || p != wirePort {
		t.Errorf("node dials %s, want edge:%s (the compose service)", node.Edge.Address, wirePort)
	}
	spec := edge.Node(node.Node.ID)
	if spec == nil {
		t.Fatalf("edge does not know node %q", node.Node.ID)
	}
	if spec.Token != node.Node.Token || spec.Token != "deploytest-token" {
		t.Errorf("node and edge tokens differ or ignore IOP_COMPOSE_NODE_TOKEN")
	}
	providers := map[string]config.ProviderSpec{}
	for _, p := range spec.Providers {
		providers[p.Name] = p
	}
	route := map[string]string{}
	for _, m := range edge.Models {
		if len(m.Providers) > 0 {
			route[m.Name] = m.Providers[0].Provider
		}
	}
	if p := providers[route["demo"]]; p.Type != "mock" {
		t.Errorf("model demo is served by %+v, want a mock provider", p)
	}
	ol := providers[route["llama"]]
	if ol.Type != "ollama" || ol.BaseURL != "http://ollama:11434" {
		t.Errorf("model llama is served by %+v, want ollama at http://ollama:11434", ol)
	}
	if _, ok := c.Services["ollama"]; !ok {
		t.Errorf("no ollama service for %s", ol.BaseURL)
	}
}

func TestPrometheusScrapesEdge(t *testing.T) {
	var p struct {
		Global struct {
			ScrapeInterval string `yaml:"scrape_interval"`
		} `yaml:"global"`
		ScrapeConfigs []struct {
			JobName        string `yaml:"job_name"`
			MetricsPath    string `yaml:"metrics_path"`
			ScrapeInterval string `yaml:"scrape_interval"`
			StaticConfigs  []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "configs/prometheus.yml", &p)
	found := false
	for _, sc := range p.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			if !slices.Contains(st.Targets, "edge:8080") {
				continue
			}
			found = true
			if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
				t.Errorf("job %s: metrics_path %q", sc.JobName, sc.MetricsPath)
			}
			interval := sc.ScrapeInterval
			if interval == "" {
				interval = p.Global.ScrapeInterval
			}
			if interval != "5s" {
				t.Errorf("job %s: scrape interval %q, want 5s", sc.JobName, interval)
			}
		}
	}
	if !found {
		t.Error("no scrape job targets edge:8080")
	}
}

func TestGrafanaProvisioning(t *testing.T) {
	var ds struct {
		Datasources []struct {
			Name, UID, Type, URL string
			IsDefault            bool `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, "configs/grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" || ds.Datasources[0].UID == "" {
		t.Fatalf("datasources %+v: want one prometheus at http://prometheus:9090 with a uid", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Name, Type string
			Options    struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "configs/grafana/provisioning/dashboards/iop.yml", &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" || dp.Providers[0].Options.Path == "" {
		t.Fatalf("dashboard providers %+v: want one file provider", dp.Providers)
	}
	g := loadCompose(t).Services["grafana"]
	dir := dp.Providers[0].Options.Path
	host, ok := g.mount(dir)
	if !ok {
		t.Fatalf("grafana mounts nothing at the provider path %s: %v", dir, g.Volumes)
	}
	if _, err := os.Stat(path(host + "/iop.json")); err != nil {
		t.Errorf("provider path %s (host %s) holds no iop.json: %v", dir, host, err)
	}
	if home := g.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" {
		if _, err := os.Stat(path(g.hostFile(t, home))); err != nil {
			t.Errorf("home dashboard %s: %v", home, err)
		}
	}
	checkDashboard(t, ds.Datasources[0].UID)
}

type dsRef struct{ Type, UID string }

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *dsRef `json:"datasource"`
	GridPos    struct{ X, Y, W, H int }
	Targets    []struct {
		Expr       string `json:"expr"`
		Datasource *dsRef `json:"datasource"`
	} `json:"targets"`
}

func checkDashboard(t *testing.T, dsUID string) {
	t.Helper()
	b, err := os.ReadFile(path("configs/grafana/dashboards/iop.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name, Type string
				Query      any
				Current    struct {
					Value any `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("iop.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "datasource" && v.Current.Value != dsUID {
			t.Errorf("datasource variable defaults to %v, want the provisioned uid %q", v.Current.Value, dsUID)
		}
	}
	for _, want := range []string{"datasource", "model", "node"} {
		if !vars[want] {
			t.Errorf("no template variable %q", want)
		}
	}
	ids := map[int]bool{}
	uses := regexp.MustCompile(`\$(model|node)\b`)
	usedVars := map[string]bool{}
	charts := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d duplicated", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		charts++
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, "iop_") {
				t.Errorf("panel %q: query %q uses no iop metric", p.Title, tg.Expr)
			}
			for _, m := range uses.FindAllStringSubmatch(tg.Expr, -1) {
				usedVars[m[1]] = true
			}
		}
	}
	if charts < 12 {
		t.Errorf("only %d charts", charts)
	}
	for _, v := range []string{"model", "node"} {
		if !usedVars[v] {
			t.Errorf("no query filters by $%s", v)
		}
	}
}

func TestDockerfileStatic(t *testing.T) {
	b, err := os.ReadFile(path("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	var froms []string
	for _, ln := range strings.Split(df, "\n") {
		if f := strings.Fields(ln); len(f) >= 2 && strings.EqualFold(f[0], "FROM") {
			froms = append(froms, f[1])
		}
	}
	if len(froms) < 2 || !strings.HasPrefix(froms[0], "golang:1.26") {
		t.Fatalf("stages %v: want a golang:1.26 builder and a final stage", froms)
	}
	final := froms[len(froms)-1]
	if strings.HasPrefix(final, "golang") || strings.Contains(final, "distroless") {
		t.Errorf("final stage %s: want a small base with wget for HEALTHCHECK (alpine/busybox)", final)
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/iop-edge", "./cmd/iop-node", "HEALTHCHECK", "/healthz", "wget"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(user) == 0 || strings.HasPrefix(user[len(user)-1][1], "0") || strings.HasPrefix(user[len(user)-1][1], "root") {
		t.Errorf("final USER %v: must not be root", user)
	}
	ign, err := os.ReadFile(path(".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "bin/", "var/"} {
		if !slices.Contains(strings.Fields(string(ign)), want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}

// The cluster profile: two edges on one config with Redis, a node that
// dials both by their service names, all in the profile.
func TestComposeClusterProfile(t *testing.T) {
	t.Setenv("IOP_COMPOSE_NODE_TOKEN", "deploytest-token")
	edge, err := config.LoadEdge(path("configs/compose/cluster/edge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := config.LoadNode(path("configs/compose/cluster/node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := loadCompose(t)
	if h, _ := hostPort(t, edge.Cluster.Redis.Address); c.Services[h].Image == "" {
		t.Errorf("cluster.redis.address %s is not a compose service", edge.Cluster.Redis.Address)
	}
	_, wirePort := hostPort(t, edge.Listen.Node)
	for _, a := range node.Edge.Addresses {
		h, p := hostPort(t, a)
		if _, ok := c.Services[h]; !ok || p != wirePort {
			t.Errorf("node dials %s: not an edge service on the wire port %s", a, wirePort)
		}
	}
	if len(node.Edge.Addresses) != 2 || edge.Node(node.Node.ID) == nil {
		t.Errorf("node %s dials %v", node.Node.ID, node.Edge.Addresses)
	}
	for _, s := range []string{"redis", "edge-c1", "edge-c2", "node-c"} {
		if svc, ok := c.Services[s]; !ok || len(svc.Profiles) != 1 || svc.Profiles[0] != "cluster" {
			t.Errorf("service %s is missing or not in the cluster profile", s)
		}
	}
}
