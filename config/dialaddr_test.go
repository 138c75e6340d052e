package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dialaddrKeys are the host:port keys, each with a function normalizing a
// config that sets it to addr and returning what Normalize reported.
var dialaddrKeys = []struct {
	key  string
	dial bool
	norm func(addr string) error
}{
	{"listen.http", false, func(a string) error {
		return (&Edge{Listen: EdgeListen{HTTP: a, Node: "127.0.0.1:7070"}}).Normalize()
	}},
	{"listen.node", false, func(a string) error {
		return (&Edge{Listen: EdgeListen{HTTP: "127.0.0.1:8080", Node: a}}).Normalize()
	}},
	{"cluster.redis.address", true, func(a string) error {
		return (&Edge{Cluster: Cluster{Redis: ClusterRedis{Address: a}}}).Normalize()
	}},
	{"edge.address", true, func(a string) error {
		return (&Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: a}}).Normalize()
	}},
	{"edge.addresses[1]", true, func(a string) error {
		return (&Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Addresses: []string{"edge0:7000", a}}}).Normalize()
	}},
}

// dialaddrProblems is what err reports about key (an empty string when
// nothing).
func dialaddrProblems(err error, key string) string {
	if err == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.Contains(l, key+` "`) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return strings.Join(lines, "; ")
}

// Every host:port key refuses a signed port and a host of dots alone; the
// addresses dialled (Redis, the node's edges) also refuse port 0, which
// nothing answers on, and an empty host. Addresses listened on keep port
// 0 (any free port) and an empty host (every interface).
func TestHostPortKeysRefuseWhatCannotBeDialled(t *testing.T) {
	for _, k := range dialaddrKeys {
		for _, tc := range []struct {
			addr           string
			listenOK, want string // the problem's words; "" = accepted
		}{
			{"h:7000", "", ""},
			{"h:07000", "", ""},
			{"[::1]:7000", "", ""},
			{"h:65535", "", ""},
			{"h:+7000", "bad port", "bad port"},
			{"h:-0", "bad port", "bad port"},
			{"h:-1", "bad port", "bad port"},
			{"h: 7000", "bad port", "bad port"},
			{"h:65536", "bad port", "bad port"},
			{"h:", "bad port", "bad port"},
			{"h:http", "bad port", "bad port"},
			{"h:0", "", "port 0, which cannot be dialled"},
			{"h:00", "", "port 0, which cannot be dialled"},
			{":7000", "", "has no host (write 127.0.0.1 or localhost"},
			{"[]:7000", "", "has no host (write 127.0.0.1 or localhost"},
			{".:7000", "no host name (only dots)", "no host name (only dots)"},
			{"..:7000", "no host name (only dots)", "no host name (only dots)"},
		} {
			want := tc.listenOK
			if k.dial {
				want = tc.want
			}
			got := dialaddrProblems(k.norm(tc.addr), k.key)
			switch {
			case want == "" && got != "":
				t.Errorf("%s %q: %s; want it accepted", k.key, tc.addr, got)
			case want != "" && !strings.Contains(got, want):
				t.Errorf("%s %q: problems %q; want one saying %q", k.key, tc.addr, got, want)
			}
		}
	}
}

// An address that is both hostless and on port 0 is reported with every
// problem it has, in one list with the config's other problems.
func TestDialledAddressReportsEveryProblem(t *testing.T) {
	err := (&Node{Edge: NodeEdge{Address: ":0"}}).Normalize()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`edge.address ":0" has no host`,
		`edge.address ":0" has port 0, which cannot be dialled`,
		"node.id is required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant %q", err, want)
		}
	}
}

// The example configs' addresses pass these checks (their other problems,
// such as a token read from an unset environment variable, are not the
// concern here).
func TestExampleConfigAddressesPass(t *testing.T) {
	files, err := filepath.Glob("../configs/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../configs/*/*.yaml")
	deeper, _ := filepath.Glob("../configs/*/*/*.yaml")
	files = append(append(files, more...), deeper...)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var lerr error
		switch {
		case strings.Contains(string(b), "\nnodes:") || strings.HasPrefix(string(b), "listen:") || strings.Contains(string(b), "\nlisten:"):
			_, lerr = LoadEdge(f)
		case strings.Contains(string(b), "edge:"):
			_, lerr = LoadNode(f)
		default:
			continue
		}
		checked++
		for _, key := range []string{"listen.http", "listen.node", "cluster.redis.address", "edge.address"} {
			if got := dialaddrProblems(lerr, key); got != "" {
				t.Errorf("%s: %s", f, got)
			}
		}
	}
	if checked < 4 {
		t.Fatalf("%d example configs checked, want the quickstart and compose ones (4)", checked)
	}
}
