package config

import (
	"strings"
	"testing"
)

// Two slips in a long key, and a dashed spelling with a slip besides, are
// still recognised.
func TestProviderKeyTwoSlipsRecognised(t *testing.T) {
	c := minimalEdge()
	c.Nodes[0].Providers[0].Extra = map[string]any{"timout_secs": 60, "api-key-evn": "X"}
	err := c.Normalize()
	for _, want := range []string{
		`unknown key "timout_secs"; did you mean timeout_sec?`,
		`unknown key "api-key-evn"; did you mean api_key_env?`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
}

// A float exactly 2^63 is out of range for a whole-number key: converted,
// it would wrap to a negative number, which max_node_conns reads as "no cap".
func TestFloatAtTwoToThe63OutOfRange(t *testing.T) {
	_, err := LoadEdge(writeFile(t, "edge.yaml", decodeBase+"listen: {max_node_conns: 9.223372036854775808e18}\n"))
	if err == nil || !strings.Contains(err.Error(), "'listen.max_node_conns' is out of range") {
		t.Fatalf("err = %v", err)
	}
}
