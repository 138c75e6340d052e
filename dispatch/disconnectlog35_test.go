package dispatch

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/nodewire"
)

// disconnectLine is the one "node disconnected" line logs holds, as a
// field map.
func disconnectLine(t *testing.T, logs *observer.ObservedLogs) map[string]any {
	t.Helper()
	lines := logs.FilterMessage("node disconnected").All()
	if len(lines) != 1 {
		t.Fatalf("%d \"node disconnected\" lines, want 1", len(lines))
	}
	if lines[0].Level != zapcore.InfoLevel {
		t.Errorf("\"node disconnected\" at %s, want info", lines[0].Level)
	}
	return lines[0].ContextMap()
}

// readyOverWire serves a dispatcher (closed at t's end) logging to an
// observer on a loopback nodewire server closed at serve's end, and
// connects node n1 to it, ready.
func readyOverWire(t, serve *testing.T) (*spyHandler, *nodewire.ClientConn, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	d := New(buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), Options{Bus: &recBus{}, Metrics: NewMetrics(prometheus.NewRegistry()), Logger: zap.New(core)})
	t.Cleanup(d.Close)
	h := &spyHandler{d: d, closed: map[*nodewire.Conn]chan struct{}{}}
	cc := dialNode(t, serveOnLoopback(serve, h), "n1")
	if err := cc.Ready(context.Background(), "n1"); err != nil {
		t.Fatalf("ready: %v", err)
	}
	// Live once activated, after the ready answer: only a live node's
	// loss is logged.
	waitFor(t, "node ready", func() bool { return nodeOf(d.Status(), "n1").Connected })
	return h, cc, logs
}

// The edge closing its own node listener and sessions (a normal
// shutdown: the server's Close, before the dispatcher's) is not an
// error: the line says the edge closed it, without the socket's "use of
// closed network connection".
func TestEdgeShutdownDisconnectLogsNoError(t *testing.T) {
	var h *spyHandler
	var logs *observer.ObservedLogs
	t.Run("serve", func(serve *testing.T) { h, _, logs = readyOverWire(t, serve) }) // its end closes the server
	h.waitClosed(t, h.conn(0))
	f := disconnectLine(t, logs)
	if _, ok := f["error"]; ok {
		t.Errorf("an edge's own close logged with error %q, want none", f["error"])
	}
	if f["reason"] != "closed by the edge" || f["node_id"] != "n1" {
		t.Errorf("fields %v, want node_id n1 and reason \"closed by the edge\"", f)
	}
}

// A node that goes away is still logged with its cause.
func TestNodeGoneDisconnectKeepsError(t *testing.T) {
	h, cc, logs := readyOverWire(t, t)
	_ = cc.Close()
	h.waitClosed(t, h.conn(0))
	f := disconnectLine(t, logs)
	if _, ok := f["error"]; !ok {
		t.Errorf("a node's disconnect logged without its error: %v", f)
	}
	// EOF or a reset, as the node's close reaches the edge.
	if r := f["reason"]; r == "closed by the edge" || r == nil {
		t.Errorf("reason %v, want the node's side", r)
	}
}
