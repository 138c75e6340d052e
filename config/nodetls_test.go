package config

import (
	"strings"
	"testing"
)

// TLS settings under edge.tls without enabled: true are refused, whichever
// one is set: the node would otherwise dial in plain TCP.
func TestNodeTLSSettingsNeedEnabled(t *testing.T) {
	for _, tls := range []ClientTLS{{ServerName: "edge.example"}, {CAFile: "ca.pem"}, {CertFile: "c.pem", KeyFile: "k.pem"}} {
		c := &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: "e:1", TLS: tls}}
		if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "enabled is false") {
			t.Errorf("%+v: err = %v", tls, err)
		}
	}
}
