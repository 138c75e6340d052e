package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node slow to answer its health poll does not hold back the others':
// each node answers its first poll only once the other node's poll has
// arrived too, which happens only if the polls are outstanding at the same
// time. Polled one after another, the first node's answer comes after the
// poll's deadline, is dropped, and its provider never shows degraded.
func TestHealthPollSlowNodeDoesNotDelayOthers(t *testing.T) {
	cfg := buildCfg(t, []tNode{{"n1", []tProv{{"p", 1, 0}}}, {"n2", []tProv{{"p", 1, 0}}}},
		[]tModel{{name: "m", cands: []string{"n1/p", "n2/p"}}})
	f := &fixture{t: t, reg: prometheus.NewRegistry(), bus: &recBus{}}
	f.d = New(cfg, Options{Bus: f.bus, Metrics: NewMetrics(f.reg), HealthInterval: time.Second})
	t.Cleanup(func() {
		f.d.Close()
		f.wg.Wait()
	})
	_, addr := startWire(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	arrived := map[string]chan struct{}{"n1": make(chan struct{}), "n2": make(chan struct{})}
	var wg sync.WaitGroup
	for id, other := range map[string]string{"n1": "n2", "n2": "n1"} {
		cc := dialNode(t, addr, id)
		if err := cc.Ready(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		wg.Add(1)
		// Owner: the test. Stops at cleanup (cancel).
		go func() {
			defer wg.Done()
			_ = cc.Serve(ctx, func(ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
				if first.GetNodeCommandRequest() == nil {
					return
				}
				health := iop.HealthState_HEALTH_STATE_UNSPECIFIED
				once.Do(func() {
					close(arrived[id])
					select {
					case <-arrived[other]:
						health = iop.HealthState_HEALTH_STATE_DEGRADED
					case <-ctx.Done():
					case <-time.After(waitDeadline):
					}
				})
				resp := &iop.NodeCommandResponse{}
				if health != iop.HealthState_HEALTH_STATE_UNSPECIFIED {
					resp.Providers = []*iop.ProviderSnapshot{{ProviderId: "p", Health: health}}
				}
				_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeCommandResponse{NodeCommandResponse: resp}})
			})
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitFor(t, "both providers degraded", func() bool {
		st := f.d.Status()
		for _, id := range []string{"n1", "n2"} {
			if p := provOf(st, id, "p"); p == nil || p.Health != "degraded" {
				return false
			}
		}
		return true
	})
}
