package dispatch

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// dropProxy is a loopback proxy in front of a redis-server that can drop
// every connection (those open and those made while it is down) and be
// restored.
type dropProxy struct {
	addr string
	mu   sync.Mutex
	down bool                  // guarded by mu
	open map[net.Conn]net.Conn // client to Redis side, guarded by mu
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	p := &dropProxy{open: map[net.Conn]net.Conn{}}
	ln := listenProxy(t, target, p.serve)
	p.addr = ln.Addr().String()
	t.Cleanup(func() {
		_ = ln.Close()
		p.drop()
	})
	return p
}

// serve copies between client c and Redis s unless the proxy is down.
func (p *dropProxy) serve(c, s net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.open[c] = s
	p.mu.Unlock()
	// Owner: the proxy. Stops when either side closes (drop closes both).
	go func() {
		_, _ = io.Copy(s, c)
		_ = s.Close()
	}()
	// Owner: the proxy. Stops when either side closes.
	go func() {
		_, _ = io.Copy(c, s)
		_ = c.Close()
		p.mu.Lock()
		delete(p.open, c)
		p.mu.Unlock()
	}()
}

// drop closes every connection and refuses new ones until restore.
func (p *dropProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c, s := range p.open {
		_ = c.Close()
		_ = s.Close()
	}
}

// restore lets connections through again.
func (p *dropProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// A single batch of returns that fails, with nothing released after it,
// has its outage reported soon after Redis answers again (the returner
// probes it outageProbe after the failure), not only at the next release
// or at shutdown, which an idle edge may reach hours later. The old code
// said nothing until then.
func TestClusterReturnerOutageReportedWithoutTraffic(t *testing.T) {
	p, logs := oneFailedReturnThenIdle(t)
	p.restore()
	waitFor(t, "the outage's warning", func() bool { return len(outageSummaries(logs)) == 1 })
	fields := outageSummaries(logs)[0].ContextMap()
	if fields["batches"] != int64(1) || fields["updates"] != int64(1) {
		t.Fatalf("outage summary counts %v batches, %v updates; want 1 and 1", fields["batches"], fields["updates"])
	}
}

// oneFailedReturnThenIdle has an edge return one lease while Redis,
// behind the returned proxy, drops every connection, and waits until that
// batch failed; nothing is released after it. A long TTL: no renewal
// (every TTL/3) sends anything meanwhile.
func oneFailedReturnThenIdle(t *testing.T) (*dropProxy, *observer.ObservedLogs) {
	t.Helper()
	rs := testredis.Start(t)
	p := newDropProxy(t, rs.Addr)
	core, logs := observer.New(zapcore.DebugLevel)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: p.addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"},
		Options{Logger: zap.New(core)})
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	p.drop()
	l.Release(ReasonCompleted)
	waitFor(t, "the return failed", func() bool { all, _ := applyFailures(logs); return all == 1 })
	return p, logs
}
