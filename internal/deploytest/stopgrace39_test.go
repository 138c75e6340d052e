package deploytest

import (
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/edgeapp"
	"github.com/iop-gateway/iop/nodeagent"
)

// composeStopGrace is compose's stop grace when a service names none.
const composeStopGrace = 10 * time.Second

// Every iop service's stop grace outlasts its own longest stop: an edge's
// drain and last returns to Redis (edgeapp.MaxStop), a node's
// shutdown.drain_sec and the cut of what still runs (nodeagent.CutWait).
// Compose's default 10 s killed the edges mid-drain: requests still
// running were cut without their error, and in the cluster profile the
// slots they held stayed taken in Redis for the lease TTL.
func TestComposeStopGraceOutlastsTheStop(t *testing.T) {
	t.Setenv("IOP_COMPOSE_NODE_TOKEN", "deploytest-token")
	c := loadCompose(t)
	checked := 0
	for name, s := range c.Services {
		if len(s.Command) != 3 {
			continue
		}
		var need time.Duration
		switch s.Command[0] {
		case "iop-edge":
			need = edgeapp.MaxStop
		case "iop-node":
			cfg, err := config.LoadNode(path(s.hostFile(t, s.Command[2])))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			need = cfg.Shutdown.Drain() + nodeagent.CutWait
		default:
			continue
		}
		checked++
		grace := composeStopGrace
		if s.StopGrace != "" {
			var err error
			if grace, err = time.ParseDuration(s.StopGrace); err != nil {
				t.Errorf("%s: stop_grace_period %q: %v", name, s.StopGrace, err)
				continue
			}
		}
		// A second's margin for the process's own exit and the runtime
		// delivering the signal.
		if grace < need+time.Second {
			t.Errorf("%s: stop grace %v, its stop can take %v: set stop_grace_period above %v", name, grace, need, need+time.Second)
		}
	}
	if checked < 5 {
		t.Errorf("checked %d iop services, want the edge, the node and the cluster profile's three", checked)
	}
}
