// Package testcaps gives fake nodes in tests the capabilities a real node
// would declare for a config: each provider is built by the real adapter
// factory and asked, so tests never keep a copy of what a type can serve.
package testcaps

import (
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/adapters"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// For returns the capabilities of every adapter of payload, by the real
// adapters' declarations (DefaultCapabilities for a type no factory knows
// or a config its factory refuses).
func For(payload *iop.NodeConfigPayload) []*iop.AdapterCapabilities {
	factories := adapters.Factories()
	var out []*iop.AdapterCapabilities
	for _, ac := range payload.GetAdapters() {
		c := adapter.DefaultCapabilities()
		if f := factories[ac.GetType()]; f != nil {
			if in, err := f(ac, adapter.Env{StoreDir: "/nonexistent", WorkspaceRoot: "/nonexistent"}); err == nil {
				if r, ok := in.(adapter.CapabilityReporter); ok {
					c = r.Capabilities()
				}
				_ = in.Close()
			}
		}
		c.Adapter = ac.GetName()
		if c.Adapter == "" {
			c.Adapter = ac.GetType()
		}
		out = append(out, c)
	}
	return out
}
