// Package healthname is the one mapping of the wire's health states
// (iop.HealthState) to the names operators read: the edge's /admin/status
// and the node's providers command both render a health by it, so the two
// never disagree. It has no dependencies beyond the generated proto
// package, so the node binary imports it without the edge's.
package healthname

import iop "github.com/iop-gateway/iop/proto/gen/iop"

// names maps each health state to its name. Unspecified (a backend not
// yet probed, which is dispatched to) shows as ok.
var names = map[iop.HealthState]string{
	iop.HealthState_HEALTH_STATE_UNSPECIFIED: "ok",
	iop.HealthState_HEALTH_STATE_OK:          "ok",
	iop.HealthState_HEALTH_STATE_DEGRADED:    "degraded",
	iop.HealthState_HEALTH_STATE_OFFLINE:     "offline",
	iop.HealthState_HEALTH_STATE_DRAINING:    "draining",
}

// Of is h's name; a state this build does not know (a newer peer's) shows
// as ok, as an unprobed one does.
func Of(h iop.HealthState) string {
	if n, ok := names[h]; ok {
		return n
	}
	return "ok"
}

// Parse reads a name back (Of's inverse; "ok" reads as OK, an unknown
// name as unspecified).
func Parse(name string) iop.HealthState {
	for h, n := range names {
		if n == name && h != iop.HealthState_HEALTH_STATE_UNSPECIFIED {
			return h
		}
	}
	return iop.HealthState_HEALTH_STATE_UNSPECIFIED
}
