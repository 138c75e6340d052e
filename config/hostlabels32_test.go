package config

import (
	"fmt"
	"strings"
	"testing"
)

// A host name with an empty label (a dot at its start or two in a row),
// or of dots alone, is refused by every key that takes a host, and so is
// a cors.allowed_origins entry whose host no browser sends in Origin;
// each problem is named once, with the config's others, in one load.
func TestEmptyLabelsAndOriginHostsRefusedByTheLoader(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"listen.http a..b", `listen: {http: "a..b:8080"}`,
			`listen.http "a..b:8080" has an empty label in its host name (a dot at its start or two in a row)`},
		{"listen.node leading dot", `listen: {node: ".edge:7070"}`,
			`listen.node ".edge:7070" has an empty label in its host name`},
		{"redis two trailing dots", `cluster: {redis: {address: "redis..:6379"}}`,
			`cluster.redis.address "redis..:6379" has an empty label in its host name`},
		{"tracing a..b", `tracing: {enabled: true, endpoint: "otel..example:4318"}`,
			`tracing.endpoint "otel..example:4318" has an empty label in its host name`},
		{"tracing only dots", `tracing: {enabled: true, endpoint: "..:4318"}`,
			`tracing.endpoint "..:4318" has no host name (only dots)`},
		{"listen only dots", `listen: {http: "..:8080"}`,
			`listen.http "..:8080" has no host name (only dots)`},
		{"origin a..b", `cors: {allowed_origins: ["https://a..example"]}`,
			`cors.allowed_origins[0] "https://a..example" has an empty label in its host name`},
		{"origin leading dot", `cors: {allowed_origins: ["https://ok.example", "https://.example:8443"]}`,
			`cors.allowed_origins[1] "https://.example:8443" has an empty label in its host name`},
		{"origin only dots", `cors: {allowed_origins: ["http://.."]}`,
			`cors.allowed_origins[0] "http://.." has no host name (only dots)`},
		{"origin no host", `cors: {allowed_origins: ["https://:8443"]}`,
			`cors.allowed_origins[0] "https://:8443" has no host`},
		{"origin long label", `cors: {allowed_origins: ["https://` + strings.Repeat("a", 64) + `.example"]}`,
			`cors.allowed_origins[0] "https://` + strings.Repeat("a", 64) + `.example" has a host name label of 64 characters`},
		{"origin zone", `cors: {allowed_origins: ["http://[fe80::1%25eth0]:5173"]}`,
			`cors.allowed_origins[0] "http://[fe80::1%25eth0]:5173" has an IPv6 zone, which no browser sends in Origin`},
		{"origin not ASCII", `cors: {allowed_origins: ["https://bücher.example"]}`,
			`cors.allowed_origins[0] "https://bücher.example" has a host name that is not ASCII: write it as browsers send it, in punycode`},
		{"origin escaped not ASCII", `cors: {allowed_origins: ["https://b%C3%BCcher.example"]}`,
			`cors.allowed_origins[0] "https://b%C3%BCcher.example" has a host name that is not ASCII`},
	}
	const rest = `
nodes: [{id: a, token: t, providers: [{name: p, type: mock}]}]
models: [{name: m, providers: [{node: a, provider: p, target: x}]}]
`
	for _, tc := range cases {
		_, err := LoadEdge(writeFile(t, "edge.yaml", tc.yaml+rest))
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant %q", tc.name, err, tc.want)
		}
		if n := strings.Count(err.Error(), strings.SplitN(tc.want, " ", 2)[0]+" "); n != 1 {
			t.Errorf("%s: the key is named %d times, want once: %v", tc.name, n, err)
		}
	}

	// Every problem in one pass, with an unrelated one.
	f := writeFile(t, "edge.yaml", `
listen: {http: "a..b:8080", node: ".edge:7070"}
cluster: {redis: {address: "redis..:6379"}}
tracing: {enabled: true, endpoint: "..:4318"}
cors: {allowed_origins: ["https://a..example", "https://ok.example", "https://bücher.example"]}
limits: {read_timeout_sec: 99999999999}
`+rest)
	_, err := LoadEdge(f)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`listen.http "a..b:8080" has an empty label`, `listen.node ".edge:7070" has an empty label`,
		`cluster.redis.address "redis..:6379" has an empty label`, `tracing.endpoint "..:4318" has no host name (only dots)`,
		`cors.allowed_origins[0] "https://a..example" has an empty label`, `cors.allowed_origins[2] "https://bücher.example" has a host name that is not ASCII`,
		"limits.read_timeout_sec must be a number of seconds of at most",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "cors.allowed_origins[1]") {
		t.Errorf("https://ok.example refused: %v", err)
	}

	// The node's edge addresses, and names that pass: one trailing dot
	// (the fully qualified name), punycode, an IPv6 address, a browser
	// extension's origin.
	_, err = LoadNode(writeFile(t, "node.yaml", `
edge: {addresses: ["edge..x:7000", ".edge:7000", "edge.:7000", "edge0:7000"]}
node: {id: n1, token: t}
`))
	if err == nil {
		t.Fatal("node accepted")
	}
	for _, want := range []string{`edge.addresses[0] "edge..x:7000" has an empty label`, `edge.addresses[1] ".edge:7000" has an empty label`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant %q", err, want)
		}
	}
	for _, ok := range []string{"edge.addresses[2]", "edge.addresses[3]"} {
		if strings.Contains(err.Error(), ok) {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	ok := fmt.Sprintf(`
listen: {http: "edge.example.:8080", node: ":7070"}
tracing: {enabled: true, endpoint: "otel.example.:4318"}
cors: {allowed_origins: ["https://xn--bcher-kva.example", "http://[::1]:5173", "https://chat.example.", "chrome-extension://%s"]}
`, strings.Repeat("a", 32)) + rest
	if _, err := LoadEdge(writeFile(t, "edge.yaml", ok)); err != nil {
		t.Fatalf("valid hosts refused: %v", err)
	}
}
