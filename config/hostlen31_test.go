package config

import (
	"fmt"
	"strings"
	"testing"
)

// hostOfLen is a host name of n characters in labels of at most 63.
func hostOfLen(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strings.Repeat("a", min(63, n-b.Len())))
	}
	h := b.String()
	if strings.HasSuffix(h, ".") || len(h) != n {
		panic(fmt.Sprintf("hostOfLen(%d) = %d characters", n, len(h)))
	}
	return h
}

// A host name longer than 253 characters, or with a label longer than 63,
// is refused by every key that takes a host, named, with the config's
// other problems in the same list; the longest names and labels pass, a
// trailing dot not counted, and an IP address is not a name.
func TestOverlongHostNamesRefusedByTheLoader(t *testing.T) {
	long := hostOfLen(254)
	label := strings.Repeat("b", 64) + ".example"
	edge := writeFile(t, "edge.yaml", fmt.Sprintf(`
listen: {http: "%s:8080", node: "%s:7070"}
tracing: {enabled: true, endpoint: "%s:4318"}
cluster: {redis: {address: "%s:6379"}}
limits: {read_timeout_sec: 99999999999}
nodes: [{id: a, token: t, providers: [{name: p, type: mock}]}]
models: [{name: m, providers: [{node: a, provider: p, target: x}]}]
`, long, label, label, long))
	_, err := LoadEdge(edge)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`listen.http "` + long + `:8080" has a host name of 254 characters (at most 253)`,
		`listen.node "` + label + `:7070" has a host name label of 64 characters (at most 63 between dots)`,
		`tracing.endpoint "` + label + `:4318" has a host name label of 64 characters`,
		`cluster.redis.address "` + long + `:6379" has a host name of 254 characters`,
		"limits.read_timeout_sec must be a number of seconds of at most",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant %q", err, want)
		}
	}

	node := writeFile(t, "node.yaml", fmt.Sprintf(`
edge: {addresses: ["edge0:7000", "%s:7000", "%s.:7000"]}
node: {id: n1, token: t}
`, long, label))
	_, err = LoadNode(node)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`edge.addresses[1] "` + long + `:7000" has a host name of 254 characters`,
		`edge.addresses[2] "` + label + `.:7000" has a host name label of 64 characters`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "edge.addresses[0]") {
		t.Errorf("edge0:7000 refused: %v", err)
	}

	// At the bounds: accepted.
	longest, longestLabel := hostOfLen(253), strings.Repeat("c", 63)+".example"
	ok := writeFile(t, "node.yaml", fmt.Sprintf(`
edge: {addresses: ["%s:7000", "%s.:7000", "%s:7000", "[fe80::1%%eth0]:7000", "10.0.0.1:7000"]}
node: {id: n1, token: t}
`, longest, "d"+longest[1:], longestLabel))
	if _, err := LoadNode(ok); err != nil {
		t.Fatalf("names at the bounds refused: %v", err)
	}
}
