package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A load report naming a provider that is not live (a reload added it and
// the node has not answered a push of that config) is not recorded: an
// OFFLINE there would restart the provider's offline grace, and a request
// for a model only it serves would queue for its whole timeout instead of
// failing at once.
func TestLoadReportForProviderNotLiveIgnored(t *testing.T) {
	grace := 1.0
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/p"}}})
	f := newFixture(t, cfg, nil)
	c := f.up("a")
	next := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}, {name: "q", cap: 1}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/p"}}, {name: "mq", timeout: 5, cands: []string{"a/q"}}})
	next.Models[1].OfflineGraceSec = &grace
	f.d.Reload(next) // not pushed: q is not live
	f.d.mu.Lock()
	q := f.d.nodes["a"].resources["q"]
	if q == nil || q.live {
		f.d.mu.Unlock()
		t.Fatalf("q after the reload: %+v, want a resource not live", q)
	}
	q.downSince = time.Now().Add(-time.Hour) // its grace long over
	f.d.mu.Unlock()

	f.d.Load(c, &iop.LoadReport{Providers: []*iop.ProviderLoad{
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK},
		{ProviderId: "q", Health: iop.HealthState_HEALTH_STATE_OFFLINE},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	l, err := f.d.Acquire(ctx, Request{Model: "mq"})
	if !errors.Is(err, ErrNoProvider) {
		t.Fatalf("acquire mq: lease %v, err %v; want ErrNoProvider at once", l, err)
	}
}
