package dispatch

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// benchExchangeNode serves node n1 of cfg over loopback: every run is
// answered START, DELTA, COMPLETE and every tunnel STATUS, BODY, END, as a
// node does; the stream is then read until the edge closes it.
func benchExchangeNode(b *testing.B) *Dispatcher {
	b.Helper()
	d := New(buildCfg(b, oneNodeCfg(b, 1), oneNodeModels), Options{Bus: dropBus{}, Metrics: NewMetrics(prometheus.NewRegistry())})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := nodewire.NewServer(nodewire.ServerConfig{Handler: d, HandshakeTimeout: waitDeadline, ReadyTimeout: waitDeadline})
	served := make(chan struct{})
	// Owner: the benchmark; stops at srv.Close in Cleanup.
	go func() { defer close(served); _ = srv.Serve(ln) }()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	cc, _, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: ln.Addr().String(), HandshakeTimeout: waitDeadline}, regReq("n1", testToken))
	if err != nil {
		b.Fatal(err)
	}
	if err := cc.Ready(ctx, "n1"); err != nil {
		b.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Owner: the benchmark; stops at stop in Cleanup.
	go func() {
		defer close(done)
		_ = cc.Serve(sctx, func(_ context.Context, st *nodewire.Stream, first *iop.Envelope) {
			if first.GetProviderTunnelRequest() != nil {
				for _, f := range []*iop.ProviderTunnelFrame{
					{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200},
					{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("data: x\n\n")},
					{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true},
				} {
					_ = st.Send(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: f}})
				}
			} else {
				for _, typ := range []iop.RunEventType{iop.RunEventType_RUN_EVENT_TYPE_START, iop.RunEventType_RUN_EVENT_TYPE_DELTA, iop.RunEventType_RUN_EVENT_TYPE_COMPLETE} {
					_ = st.Send(runEnv(typ))
				}
			}
			_ = st.CloseWrite()
			for {
				if _, err := st.Recv(); err != nil {
					break
				}
			}
		})
	}()
	b.Cleanup(func() {
		stop()
		<-done
		_ = cc.Close()
		d.Close()
		_ = srv.Close()
		<-served
	})
	return d
}

// BenchmarkRunExchange: one whole normalized run per iteration over a
// loopback node (acquire, open, three events, finish).
func BenchmarkRunExchange(b *testing.B) {
	d := benchExchangeNode(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := d.Acquire(ctx, Request{Model: "m"})
		if err != nil {
			b.Fatal(err)
		}
		rs, err := l.OpenRun(ctx, time.Time{}, runReq())
		if err != nil {
			b.Fatal(err)
		}
		readToEnd(b, rs.Recv)
		rs.Finish(l, ReasonCompleted, "", time.Second)
	}
}

// BenchmarkTunnelExchange: BenchmarkRunExchange for a tunnel (STATUS,
// BODY, END).
func BenchmarkTunnelExchange(b *testing.B) {
	d := benchExchangeNode(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := d.Acquire(ctx, Request{Model: "m"})
		if err != nil {
			b.Fatal(err)
		}
		ts, err := l.OpenTunnel(ctx, time.Time{}, &iop.ProviderTunnelRequest{RunId: "run_1"})
		if err != nil {
			b.Fatal(err)
		}
		readToEnd(b, ts.Recv)
		ts.Finish(l, ReasonCompleted, "", time.Second)
	}
}

// readToEnd reads a stream until it ends, failing on any other error.
func readToEnd[T any](b *testing.B, recv func() (T, error)) {
	for {
		if _, err := recv(); err != nil {
			if !errors.Is(err, ErrStreamEnded) {
				b.Fatal(err)
			}
			return
		}
	}
}
