package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// SECURITY.md tells operators every limit with its default; the config
// package is what applies those defaults. These tests hold the two
// together, so that a default changed in one place cannot leave the other
// stating the old value.

// docTableRow is one body row of a Markdown table whose header has a
// "default" column.
type docTableRow struct {
	line  int
	cells []string
	def   int // index of the default cell
}

// docTableRows returns the body rows of every table in md whose header
// names a "default" column. A row whose cell count differs from its
// header's is an error: the cells could not be told apart.
func docTableRows(md string) ([]docTableRow, error) {
	var rows []docTableRow
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "|") || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "| ---") {
			continue
		}
		header := splitDocRow(lines[i])
		def := -1
		for j, h := range header {
			if h == "default" {
				def = j
			}
		}
		i += 2
		for ; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
			if def < 0 {
				continue
			}
			cells := splitDocRow(lines[i])
			if len(cells) != len(header) {
				return nil, fmt.Errorf("line %d: %d cells under a header of %d", i+1, len(cells), len(header))
			}
			rows = append(rows, docTableRow{line: i + 1, cells: cells, def: def})
		}
	}
	return rows, nil
}

func splitDocRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// docKeyAtStart matches a cell that begins with a config key in backticks:
// a dotted path (`limits.max_body_bytes`, `models[].max_queue`).
var docKeyAtStart = regexp.MustCompile("^`([a-z][a-z0-9_]*(?:\\[\\])?(?:\\.[a-z][a-z0-9_]*(?:\\[\\])?)+)`")

// docQuantity is a default as the docs spell it: "10 s", "8 MiB",
// "16,384", "200 ms", "0.05 s".
var docQuantity = regexp.MustCompile(`^([0-9][0-9,]*(?:\.[0-9]+)?)(?:\s*(ms|s|min|KiB|MiB|GiB|bytes))?(?:$|[^A-Za-z0-9])`)

// docString is a string default in backticks: "`iop`".
var docString = regexp.MustCompile("^`([^`]*)`")

// docDefault is what a doc row says a key defaults to.
type docDefault struct {
	key  string
	text string // the default as written, from its first character
	line int
}

// securityDocDefaults returns every key SECURITY.md gives a default for:
// rows whose first cell begins with a key (the default cell then gives
// its value), and default cells that begin with a key followed by its
// value in parentheses ("`nodes[].heartbeat_timeout_sec` (15 s)").
func securityDocDefaults(md string) ([]docDefault, error) {
	rows, err := docTableRows(md)
	if err != nil {
		return nil, err
	}
	var out []docDefault
	for _, r := range rows {
		def := r.cells[r.def]
		if m := docKeyAtStart.FindStringSubmatch(r.cells[0]); m != nil {
			out = append(out, docDefault{key: m[1], text: def, line: r.line})
			continue
		}
		if m := docKeyAtStart.FindStringSubmatch(def); m != nil {
			rest := strings.TrimSpace(def[len(m[0]):])
			if !strings.HasPrefix(rest, "(") {
				return nil, fmt.Errorf("line %d: default cell names %s without its value in parentheses", r.line, m[1])
			}
			out = append(out, docDefault{key: m[1], text: rest[1:], line: r.line})
		}
	}
	return out, nil
}

// defaultedConfigs loads the smallest edge and node configs that reach
// every default (a node, a provider and a model to hold the per-item
// keys, a Redis address for the cluster keys) through LoadEdge and
// LoadNode, the step both binaries start with.
func defaultedConfigs(t *testing.T) (*Edge, *Node) {
	t.Helper()
	dir := t.TempDir()
	edgeFile := filepath.Join(dir, "edge.yaml")
	nodeFile := filepath.Join(dir, "node.yaml")
	const edgeYAML = `
cluster:
  redis:
    address: 127.0.0.1:6379
nodes:
  - id: n1
    token: t1
    providers:
      - name: p1
        type: mock
models:
  - name: m1
    providers:
      - {node: n1, provider: p1, target: x}
`
	const nodeYAML = `
edge:
  address: 127.0.0.1:7070
node:
  id: n1
  token: t1
`
	if err := os.WriteFile(edgeFile, []byte(edgeYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nodeFile, []byte(nodeYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	edge, err := LoadEdge(edgeFile)
	if err != nil {
		t.Fatalf("minimal edge config: %v", err)
	}
	node, err := LoadNode(nodeFile)
	if err != nil {
		t.Fatalf("minimal node config: %v", err)
	}
	return edge, node
}

// configField finds key ("models[].max_queue") in cfg by its mapstructure
// names, taking a list's first element, and returns the value behind any
// pointer. ok is false when the config has no such key.
func configField(cfg any, key string) (reflect.Value, bool) {
	v := reflect.ValueOf(cfg)
	for _, part := range strings.Split(key, ".") {
		list := strings.HasSuffix(part, "[]")
		part = strings.TrimSuffix(part, "[]")
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		found := false
		for i := 0; i < v.NumField(); i++ {
			if strings.Split(v.Type().Field(i).Tag.Get("mapstructure"), ",")[0] == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}, false
		}
		if list {
			if v.Kind() != reflect.Slice || v.Len() == 0 {
				return reflect.Value{}, false
			}
			v = v.Index(0)
		}
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}, false
		}
		v = v.Elem()
	}
	return v, true
}

// unitScale is what one doc unit is in the unit a key's name implies
// (seconds for *_sec, milliseconds for *_ms, bytes for *_bytes, MiB for
// *_mb, a bare count otherwise); ok is false for a unit the key cannot
// be given in.
func unitScale(key, unit string) (float64, bool) {
	scales := map[string]map[string]float64{
		"_sec":   {"": 1, "s": 1, "ms": 0.001, "min": 60},
		"_ms":    {"": 1, "ms": 1, "s": 1000},
		"_bytes": {"": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30},
		"_mb":    {"": 1, "MiB": 1, "GiB": 1 << 10},
	}
	for suffix, s := range scales {
		if strings.HasSuffix(key, suffix) {
			f, ok := s[unit]
			return f, ok
		}
	}
	return 1, unit == ""
}

// checkDocDefault compares one documented default with the value the
// config holds after its defaults were applied; "" means they agree.
func checkDocDefault(edge *Edge, node *Node, d docDefault) string {
	v, ok := configField(edge, d.key)
	if !ok {
		v, ok = configField(node, d.key)
	}
	if !ok {
		return fmt.Sprintf("%s is not a key of the edge or node config", d.key)
	}
	return compareDocDefault(v, d.key, d.text)
}

// compareDocDefault compares the default text (a number with its unit, or
// a string in backticks) with v, the value of key after defaults.
func compareDocDefault(v reflect.Value, key, text string) string {
	d := docDefault{key: key, text: text}
	if v.Kind() == reflect.Slice || v.Kind() == reflect.Map {
		// A list key has no scalar default; its row says how entries are
		// read, and only the key itself can be held to the config.
		return ""
	}
	if v.Kind() == reflect.String {
		m := docString.FindStringSubmatch(d.text)
		if m == nil {
			return fmt.Sprintf("%s: default %q is not a string in backticks", d.key, d.text)
		}
		if m[1] != v.String() {
			return fmt.Sprintf("%s: the doc says `%s`, the config applies %q", d.key, m[1], v.String())
		}
		return ""
	}
	var got float64
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		got = float64(v.Int())
	case reflect.Float32, reflect.Float64:
		got = v.Float()
	default:
		return fmt.Sprintf("%s is a %s, not a number or string", d.key, v.Kind())
	}
	m := docQuantity.FindStringSubmatch(d.text)
	if m == nil {
		return fmt.Sprintf("%s: default %q does not begin with a number", d.key, d.text)
	}
	n, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil {
		return fmt.Sprintf("%s: default %q: %v", d.key, d.text, err)
	}
	scale, ok := unitScale(d.key, m[2])
	if !ok {
		return fmt.Sprintf("%s: default %q is in a unit the key does not take", d.key, d.text)
	}
	if want := n * scale; math.Abs(want-got) > 1e-9*math.Max(1, math.Abs(got)) {
		return fmt.Sprintf("%s: the doc says %s, the config applies %g", d.key, strings.TrimSpace(m[1]+" "+m[2]), got)
	}
	return ""
}

func TestSecurityDocDefaultsAreTheConfigDefaults(t *testing.T) {
	md, err := os.ReadFile("../SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := securityDocDefaults(string(md))
	if err != nil {
		t.Fatalf("SECURITY.md: %v", err)
	}
	// A parser that matched nothing would pass trivially: SECURITY.md's
	// limit tables name well over this many keys.
	if len(defaults) < 15 {
		t.Fatalf("found %d keys with defaults in SECURITY.md; the tables were not read", len(defaults))
	}
	edge, node := defaultedConfigs(t)
	for _, d := range defaults {
		if msg := checkDocDefault(edge, node, d); msg != "" {
			t.Errorf("SECURITY.md line %d: %s", d.line, msg)
		}
		t.Logf("line %d: %s = %.40s", d.line, d.key, d.text)
	}
	t.Logf("%d defaults checked", len(defaults))
}

// The checker itself must see a wrong number, a wrong unit and an unknown
// key, or the test above could pass on anything.
func TestSecurityDocDefaultCheckerRefuses(t *testing.T) {
	edge, node := defaultedConfigs(t)
	for _, c := range []struct {
		d    docDefault
		want bool
	}{
		{docDefault{key: "limits.max_body_bytes", text: "8 MiB"}, true},
		{docDefault{key: "limits.max_body_bytes", text: "8,388,608"}, true},
		{docDefault{key: "limits.max_body_bytes", text: "8 KiB"}, false},
		{docDefault{key: "limits.read_header_timeout_sec", text: "10 s"}, true},
		{docDefault{key: "limits.read_header_timeout_sec", text: "10 ms"}, false},
		{docDefault{key: "limits.read_header_timeout_sec", text: "11 s"}, false},
		{docDefault{key: "listen.max_http_conns", text: "16,384"}, true},
		{docDefault{key: "listen.max_http_conns", text: "16,384 s"}, false},
		{docDefault{key: "cluster.redis.timeout_ms", text: "200 ms"}, true},
		{docDefault{key: "cluster.redis.key_prefix", text: "`iop` (at most 64 bytes)"}, true},
		{docDefault{key: "cluster.redis.key_prefix", text: "`iops`"}, false},
		{docDefault{key: "shutdown.drain_sec", text: "10 s; `0` = none"}, true},
		{docDefault{key: "limits.max_bodybytes", text: "8 MiB"}, false},
		{docDefault{key: "models[].max_queue", text: "many"}, false},
	} {
		if got := checkDocDefault(edge, node, c.d) == ""; got != c.want {
			t.Errorf("%s = %q: agreed %v, want %v", c.d.key, c.d.text, got, c.want)
		}
	}
}

// docProseDefault is a default given in running text: a key in backticks
// followed by its value in parentheses, "(64 MiB; …)", "(default 2)",
// "(omitted: 10; …)". A paren that does not begin with a value ("(bearer)",
// "(no answer)") is not a default.
var docProseDefault = regexp.MustCompile("`([a-z][a-z0-9_]*(?:\\[\\])?(?:\\.[a-z][a-z0-9_]*(?:\\[\\])?)+)`\\s+\\(((?:default |omitted: )[0-9`][^)]*|[0-9][^)]*)\\)")

// The operator docs also give defaults in their text; those must agree
// with the config as the tables must. Line breaks count as spaces, so a
// key and its value on two lines are read together.
func TestDocsProseDefaultsAreTheConfigDefaults(t *testing.T) {
	edge, node := defaultedConfigs(t)
	checked := 0
	for _, file := range []string{"../SECURITY.md", "../README.md", "../docs/architecture.md", "../docs/cluster.md", "../docs/routing.md", "../docs/wire.md"} {
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(md), "\n", " ")
		for _, m := range docProseDefault.FindAllStringSubmatchIndex(text, -1) {
			val := strings.TrimPrefix(strings.TrimPrefix(text[m[4]:m[5]], "default "), "omitted: ")
			d := docDefault{key: text[m[2]:m[3]], text: val, line: 1 + strings.Count(string(md[:m[0]]), "\n")}
			if msg := checkDocDefault(edge, node, d); msg != "" {
				t.Errorf("%s line %d: %s", file, d.line, msg)
			}
			t.Logf("%s line %d: %s = %.30s", file, d.line, d.key, d.text)
			checked++
		}
	}
	// SECURITY.md, README.md, routing.md and wire.md give at least this
	// many in their text.
	if checked < 6 {
		t.Fatalf("found %d defaults in the docs' text; the pattern read nothing", checked)
	}
	t.Logf("%d defaults in the docs' text checked", checked)
}
