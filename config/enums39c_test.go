package config

import (
	"strings"
	"testing"
)

// Each value CONTRACT §3 lists for providers[].category and
// models[].routing is accepted as written, and a value outside them is
// refused naming its key: a config written from the contract loads, and a
// typo is not silently taken for a default.
func TestContractEnumValuesAccepted(t *testing.T) {
	for _, cat := range []string{"api", "cli", "local_inference"} {
		c := minimalEdge()
		c.Nodes[0].Providers[0].Category = cat
		if err := c.Normalize(); err != nil {
			t.Errorf("category %q: %v", cat, err)
		} else if got := c.Nodes[0].Providers[0].Category; got != cat {
			t.Errorf("category %q normalized to %q", cat, got)
		}
	}
	for _, r := range []string{"ordered", "least_load", "prefix_affinity"} {
		c := minimalEdge()
		c.Models[0].Routing = r
		if err := c.Normalize(); err != nil {
			t.Errorf("routing %q: %v", r, err)
		} else if got := c.Models[0].Routing; got != r {
			t.Errorf("routing %q normalized to %q", r, got)
		}
	}
	c := minimalEdge()
	c.Nodes[0].Providers[0].Category = "gpu"
	c.Models[0].Routing = "Ordered"
	err := c.Normalize()
	for _, want := range []string{`nodes[0].providers[0].category "gpu"`, `models[0].routing "Ordered"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Normalize = %v, want %s refused", err, want)
		}
	}
}
