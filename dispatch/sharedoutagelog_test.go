package dispatch

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// renewalFailures counts the renewal-failure log lines logs holds, and
// those of them at warn level or above.
func renewalFailures(logs *observer.ObservedLogs) (all, warned int) {
	for _, e := range logs.FilterMessage("cluster lease renewal failed").All() {
		all++
		if e.Level >= zapcore.WarnLevel {
			warned++
		}
	}
	return all, warned
}

// While Redis does not answer, the renewal is retried every 500 ms: an
// outage is one warning (the retries log at debug level), and the next
// outage, after Redis answered again, is a warning of its own. Warning on
// every retry wrote two lines a second per edge for as long as Redis was
// down, burying the rest of the log.
func TestClusterRenewalOutageWarnsOnce(t *testing.T) {
	rs := testredis.Start(t)
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: 30, cands: []string{"n/p"}}})
	led := cluster.Open(cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: 2 * time.Second, EdgeID: "e1"})
	f := &fixture{t: t, reg: prometheus.NewRegistry(), bus: &recBus{}}
	f.d = New(cfg, Options{Bus: f.bus, Metrics: NewMetrics(f.reg), Ledger: led, LedgerTTL: 3 * time.Second, Logger: zap.New(core)})
	t.Cleanup(func() {
		f.d.Close()
		f.wg.Wait()
		_ = led.Close()
	})
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"}) // a renewal with a lease to renew
	defer l.Release(ReasonCompleted)

	rs.Stop()
	waitFor(t, "three failed renewals", func() bool { all, _ := renewalFailures(logs); return all >= 3 })
	if _, warned := renewalFailures(logs); warned != 1 {
		t.Fatalf("%d renewal failures of one outage logged at warn level, want 1", warned)
	}
	rs.Restart()
	waitFor(t, "the renewal answered again", func() bool {
		return logs.FilterMessage("cluster lease renewal answers again").Len() == 1
	})
	rs.Stop()
	waitFor(t, "a second outage's warning", func() bool { _, warned := renewalFailures(logs); return warned == 2 })
}
