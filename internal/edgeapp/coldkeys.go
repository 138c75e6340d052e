package edgeapp

import (
	"reflect"

	"github.com/iop-gateway/iop/config"
)

// coldKeys are the config sections and keys fixed when the edge starts:
// the listeners and their bounds, the HTTP server's own timeouts, the
// logger, tracing, the runtime settings and the cluster's Redis. A reload
// applies everything else (auth, the other limits, nodes, models).
var coldKeys = []struct {
	key string
	get func(*config.Edge) any
}{
	{"listen", func(c *config.Edge) any { return c.Listen }},
	{"limits.read_header_timeout_sec", func(c *config.Edge) any { return c.Limits.ReadHeaderTimeoutSec }},
	{"limits.idle_timeout_sec", func(c *config.Edge) any { return c.Limits.IdleTimeoutSec }},
	{"log", func(c *config.Edge) any { return c.Log }},
	{"tracing", func(c *config.Edge) any { return c.Tracing }},
	{"runtime", func(c *config.Edge) any { return c.Runtime }},
	{"cluster", func(c *config.Edge) any { return c.Cluster }},
}

// restartRequired names the cold keys whose value in next differs from the
// running one, so a reload can say what it did not apply instead of
// dropping it silently. Names only: values (a Redis password) are never
// reported.
func restartRequired(running, next *config.Edge) []string {
	var keys []string
	for _, k := range coldKeys {
		if !reflect.DeepEqual(k.get(running), k.get(next)) {
			keys = append(keys, k.key)
		}
	}
	return keys
}
