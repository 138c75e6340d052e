package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// README.md's configuration tables (CONTRACT §3, §4) list every key with
// its default; these tests hold them to the defaults LoadEdge and LoadNode
// apply, as securitydoc41d_test.go does for SECURITY.md.

// readmeCellKey reads a key cell: "`a.b`", "`a.b`, `c`, `d`", "`a.b` /
// `c`", "`…c`" (continuing the last full key's parent). A later key
// without a dot takes the first key's parent. ok is false for a cell that
// does not begin with a key ("any other key", "`tracing.*`"). A key of
// one name (`store_dir`) is a top-level key.
var readmeCellKey = regexp.MustCompile("`(…)?([a-z][a-z0-9_]*(?:\\[\\])?(?:\\.[a-z][a-z0-9_]*(?:\\[\\])?)*)`")

// readmeWildcard is a row for a whole section ("`tracing.*`").
var readmeWildcard = regexp.MustCompile("^`([a-z][a-z0-9_]*)\\.\\*`")

func readmeKeys(cell, lastParent string) (keys []string, ok bool) {
	if !strings.HasPrefix(cell, "`") {
		return nil, false
	}
	for _, m := range readmeCellKey.FindAllStringSubmatch(cell, -1) {
		key := m[2]
		switch {
		case m[1] != "":
			key = lastParent + "." + key
		case len(keys) > 0 && !strings.Contains(key, ".") && strings.Contains(keys[0], "."):
			key = keys[0][:strings.LastIndex(keys[0], ".")] + "." + key
		}
		keys = append(keys, key)
	}
	return keys, len(keys) > 0
}

// readmeSetByMinimal are keys the minimal configs of defaultedConfigs
// give a value (to reach the defaults behind them): only their being keys
// is checked.
var readmeSetByMinimal = map[string]bool{
	"cluster.redis.address": true, "edge.address": true,
}

// readmeDerived are the defaults the README states relative to another
// value, by key: the words it uses, and a check that returns "" when the
// loaded config agrees.
var readmeDerived = map[string]struct {
	text  string
	check func(e *Edge) string
}{
	"nodes[].heartbeat_timeout_sec": {"3×interval", func(*Edge) string {
		// An interval other than the default, so that a fixed 15 s
		// would not pass for three intervals.
		nd, err := derivedNode()
		if err != nil {
			return err.Error()
		}
		if nd.HeartbeatTimeoutSec != 3*nd.HeartbeatIntervalSec {
			return fmt.Sprintf("heartbeat_timeout_sec is %g, interval %g", nd.HeartbeatTimeoutSec, nd.HeartbeatIntervalSec)
		}
		return ""
	}},
	"nodes[].providers[].long_capacity": {"= capacity", func(*Edge) string {
		// A capacity other than the default 1, which a fixed
		// long_capacity of 1 would match.
		nd, err := derivedNode()
		if err != nil {
			return err.Error()
		}
		if p := nd.Providers[0]; p.LongCapacity != p.Capacity {
			return fmt.Sprintf("long_capacity is %d, capacity %d", p.LongCapacity, p.Capacity)
		}
		return ""
	}},
	"nodes[].providers[].name": {"the type", func(*Edge) string {
		// The minimal config names its provider; one without a name is
		// what is asked here.
		pr := ProviderSpec{Type: "mock"}
		var p problems
		pr.normalize(&p, "x")
		if pr.Name != pr.Type {
			return fmt.Sprintf("an unnamed provider is named %q", pr.Name)
		}
		return ""
	}},
	"nodes[].providers[].category": {"from type", func(e *Edge) string {
		// Empty in the config: the node's adapter declares it.
		if c := e.Nodes[0].Providers[0].Category; c != "" {
			return fmt.Sprintf("category defaults to %q, not left to the adapter", c)
		}
		return ""
	}},
}

// derivedNode is a node given an interval and a capacity other than their
// defaults, after Normalize, for the defaults derived from them.
func derivedNode() (NodeSpec, error) {
	c := &Edge{Nodes: []NodeSpec{{ID: "n", Token: "t", HeartbeatIntervalSec: 2,
		Providers: []ProviderSpec{{Type: "mock", Capacity: 4}}}}}
	if err := c.Normalize(); err != nil {
		return NodeSpec{}, fmt.Errorf("derived node: %w", err)
	}
	return c.Nodes[0], nil
}

// readmeEffective are keys whose default lives beside the field the key
// decodes into (the field stays nil so that 0 can be told from unset).
var readmeEffective = map[string]func(e *Edge, n *Node) reflect.Value{
	"tracing.sample_ratio": func(e *Edge, _ *Node) reflect.Value { return reflect.ValueOf(e.Tracing.SampleRatio) },
}

// checkReadmeDefault compares one README default with the loaded cfg
// (the edge's or the node's, by the table).
func checkReadmeDefault(edge *Edge, node *Node, cfg any, key, text string) string {
	v, ok := configField(cfg, key)
	if f := readmeEffective[key]; f != nil {
		v, ok = f(edge, node), true
	}
	if !ok {
		// A nil pointer whose default is applied elsewhere would land
		// here too; readmeEffective names those.
		return fmt.Sprintf("%s is not a key of this config", key)
	}
	if d, ok := readmeDerived[key]; ok {
		if text != d.text {
			return fmt.Sprintf("%s: the README says %q, where this test knows %q", key, text, d.text)
		}
		return d.check(edge)
	}
	switch {
	case text == "required" || readmeSetByMinimal[key]:
		return ""
	case strings.HasPrefix(text, "—"):
		if !v.IsZero() {
			return fmt.Sprintf("%s: the README says none, the config applies %v", key, v)
		}
		return ""
	case strings.HasPrefix(text, "`[]`"):
		if v.Kind() != reflect.Slice || v.Len() != 0 {
			return fmt.Sprintf("%s: the README says an empty list, the config applies %v", key, v)
		}
		return ""
	case text == "false" || text == "off":
		if !v.IsZero() {
			return fmt.Sprintf("%s: the README says %s, the config applies %v", key, text, v)
		}
		return ""
	case text == "`\"\"`":
		if v.Kind() != reflect.String || v.Len() != 0 {
			return fmt.Sprintf("%s: the README says empty, the config applies %v", key, v)
		}
		return ""
	}
	if v.Kind() == reflect.Bool {
		return fmt.Sprintf("%s: default %q is not false or off", key, text)
	}
	return compareDocDefault(v, key, text)
}

// readmeConfigTable returns the body rows of the first table after the
// heading that begins with heading.
func readmeConfigTable(md, heading string) ([][]string, error) {
	i := strings.Index(md, "\n"+heading)
	if i < 0 {
		return nil, fmt.Errorf("no heading %q", heading)
	}
	var rows [][]string
	inTable := false
	for _, line := range strings.Split(md[i+1:], "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		if strings.HasPrefix(line, "| key ") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := splitDocRow(line)
		if len(cells) != 3 {
			return nil, fmt.Errorf("%q: %d cells, not key | default | meaning", line, len(cells))
		}
		rows = append(rows, cells)
	}
	return rows, nil
}

func TestReadmeConfigDefaultsAreTheConfigDefaults(t *testing.T) {
	md, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	edge, node := defaultedConfigs(t)
	checked := 0
	for _, tbl := range []struct {
		heading string
		cfg     any
		least   int
	}{
		{"### Edge (`configs/edge.yaml`)", edge, 40},
		{"### Node (`configs/node.yaml`)", node, 15},
	} {
		var documented []string
		rows, err := readmeConfigTable(string(md), tbl.heading)
		if err != nil {
			t.Fatalf("README.md: %v", err)
		}
		n, lastParent := 0, ""
		for _, r := range rows {
			if m := readmeWildcard.FindStringSubmatch(r[0]); m != nil {
				documented = append(documented, m[1])
			}
			keys, ok := readmeKeys(r[0], lastParent)
			if !ok {
				continue
			}
			documented = append(documented, keys...)
			if !strings.HasPrefix(r[0], "`…") {
				lastParent = keys[0][:max(strings.LastIndex(keys[0], "."), 0)]
			}
			defs := []string{r[1]}
			if len(keys) > 1 {
				if parts := strings.Split(r[1], ", "); len(parts) == len(keys) {
					defs = parts
				}
			}
			for i, key := range keys {
				def := defs[min(i, len(defs)-1)]
				if msg := checkReadmeDefault(edge, node, tbl.cfg, key, def); msg != "" {
					t.Errorf("README.md %s: %s", tbl.heading, msg)
				}
				n++
			}
		}
		// The table is the reference for every key (the example configs
		// point to it): a key the config reads must have its row.
		for _, k := range configKeys(reflect.TypeOf(tbl.cfg).Elem(), "") {
			if !slices.ContainsFunc(documented, func(d string) bool {
				return k == d || strings.HasPrefix(k, d+".") || strings.HasPrefix(k, d+"[].")
			}) {
				t.Errorf("README.md %s: no row for %s", tbl.heading, k)
			}
		}
		if n < tbl.least {
			t.Fatalf("README.md %s: %d keys found; the table was not read", tbl.heading, n)
		}
		checked += n
	}
	t.Logf("%d README keys checked", checked)
}

// configKeys lists every key of t's config by its mapstructure names
// (lists as "name[]"), leaves only.
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			keys = append(keys, configKeys(ft, key+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, configKeys(ft.Elem(), key+"[].")...)
		default:
			keys = append(keys, key)
		}
	}
	return keys
}
