package chaos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testcert"
	"github.com/iop-gateway/iop/nodeagent"
	"github.com/iop-gateway/iop/nodewire"
)

// TLS on the node wire, with a CA generated at test time: a node that
// trusts the CA connects and serves; a plain-TCP node, a node trusting
// another CA and — with mutual TLS — a node without a client certificate
// or with one from another CA never get in (their supervisors exhaust
// their attempts; the edge never shows them connected).
func TestNodeWireTLS(t *testing.T) {
	ca, other := testcert.NewCA(t, t.TempDir(), "iop-test"), testcert.NewCA(t, t.TempDir(), "impostor")
	srvCert, srvKey := ca.Issue(t, "edge", true)
	cliCert, cliKey := ca.Issue(t, "node-a", false)
	badCert, badKey := other.Issue(t, "node-x", false)

	clientTLS := func(t *testing.T, caFile, cert, key string) *nodewire.ClientTLS {
		c, err := nodewire.NewClientTLS(caFile, "", cert, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, mutual := range []bool{false, true} {
		name := map[bool]string{false: "tls", true: "mtls"}[mutual]
		t.Run(name, func(t *testing.T) {
			clientCA := ""
			if mutual {
				clientCA = ca.File
			}
			stls, err := nodewire.ServerTLSConfig(srvCert, srvKey, clientCA, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &config.Edge{
				Nodes:  []config.NodeSpec{nodeSpec("a", "tok-a", 0.5, 10, mockProvider("m", 0, 1))},
				Models: []config.ModelSpec{model("demo", 10, [2]string{"a", "m"})},
			}
			e := startTestEdge(t, cfg, edgeOptions{TLS: stls})
			log := quietLogger(t)
			start := func(tc *nodewire.ClientTLS, attempts int) *stack.Node {
				return stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "tok-a", Logger: log, MaxAttempts: attempts,
					Dial: &nodewire.DialConfig{Address: e.NodeAddr, TLS: tc, Logger: log, HandshakeTimeout: 5 * time.Second}})
			}
			refused := map[string]*nodewire.ClientTLS{
				"plain TCP":         nil,
				"untrusted CA":      clientTLS(t, other.File, cliCert, cliKey),
				"system roots only": clientTLS(t, "", cliCert, cliKey), // system roots do not know the test CA
			}
			if mutual {
				refused["no client certificate"] = clientTLS(t, ca.File, "", "")
				refused["client certificate from another CA"] = clientTLS(t, ca.File, badCert, badKey)
			}
			for what, tc := range refused {
				n := start(tc, 2)
				select {
				case <-n.Done():
				case <-time.After(waitLong):
					t.Fatalf("%s: node still trying after %s", what, waitLong)
				}
				if err := n.Err(); !errors.Is(err, nodeagent.ErrAttemptsExhausted) {
					t.Errorf("%s: node ended with %v, want its attempts exhausted", what, err)
				}
				if connected(e.D, "a") {
					t.Fatalf("%s: the node got in", what)
				}
				t.Logf("%s: refused: %v", what, n.Err())
			}
			cert, key := "", ""
			if mutual {
				cert, key = cliCert, cliKey
			}
			start(clientTLS(t, ca.File, cert, key), 0)
			waitFor(t, waitLong, "the trusted node to be ready", func() bool { return connected(e.D, "a") })
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			if r := doChat(ctx, newClient(t), e.URL, "demo", []string{"over", "tls"}, true); !r.ok {
				t.Errorf("request over the TLS wire: kind %q violation %q", r.kind, r.violation)
			}
		})
	}
}
