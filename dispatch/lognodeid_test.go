package dispatch

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node id the edge has not matched to its config is the peer's own
// text, up to a registration frame's size: the refusal's log line carries
// a bounded cut of it, not all of it, so anyone reaching the node port
// cannot make each log line kilobytes long.
func TestRefusedNodeIDIsBoundedInLogs(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := buildCfg(t, oneNodeCfg(t, 2), oneNodeModels)
	d := New(cfg, Options{Bus: &recBus{}, Metrics: NewMetrics(prometheus.NewRegistry()), Logger: zap.New(core)})
	t.Cleanup(d.Close)

	long := "intruder\n" + strings.Repeat("é", 4000)
	d.Register(new(nodewire.Conn), regReq(long, testToken))
	d.Ready(new(nodewire.Conn), &iop.NodeReadyRequest{NodeId: long})

	found := 0
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if f.Key != "node_id" {
				continue
			}
			found++
			if len(f.String) > 128+len("…") || !utf8.ValidString(f.String) {
				t.Errorf("%q logged a %d-byte node id", e.Message, len(f.String))
			}
		}
	}
	if found != 2 {
		t.Fatalf("%d log lines named the node id, want 2 (the refusal and the refused ready)", found)
	}
}
