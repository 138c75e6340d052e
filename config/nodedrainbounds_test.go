package config

import (
	"strings"
	"testing"
)

// A shutdown.drain_sec too large for a duration (which would wrap to a
// negative one: no drain at all) or not a number is a config error.
func TestNodeShutdownDrainOutOfRange(t *testing.T) {
	for _, v := range []string{"1e300", ".nan", ".inf"} {
		_, err := LoadNode(writeFile(t, "node.yaml", "edge: {address: 'e:1'}\nnode: {id: a, token: t}\nshutdown: {drain_sec: "+v+"}\n"))
		if err == nil || !strings.Contains(err.Error(), "shutdown.drain_sec must be a number of seconds") {
			t.Errorf("drain_sec %s: %v", v, err)
		}
	}
}
