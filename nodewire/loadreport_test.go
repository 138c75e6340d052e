package nodewire

import (
	"net"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// loadHandler is a fakeHandler that takes load reports.
type loadHandler struct {
	*fakeHandler
	loads chan *iop.LoadReport
}

func (h *loadHandler) Load(c *Conn, r *iop.LoadReport) { h.loads <- r }

// A ready node's load report reaches the edge's handler (LoadReceiver),
// and the connection goes on.
func TestLoadReportReachesHandler(t *testing.T) {
	h := &loadHandler{fakeHandler: newFakeHandler(), loads: make(chan *iop.LoadReport, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerConfig{Handler: h})
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }() // Owner: the test; ends at srv.Close.
	t.Cleanup(func() { _ = srv.Close(); <-served })
	cc, _ := readyPairVia(t, ln.Addr().String(), h.fakeHandler, "n1")
	report := &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p1", Running: 3}}}
	if err := cc.SendLoad(report, time.Now().Add(waitLong)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-h.loads:
		if len(r.GetProviders()) != 1 || r.GetProviders()[0].GetRunning() != 3 {
			t.Fatalf("load report %v, want the one sent", r)
		}
	case <-time.After(waitLong):
		t.Fatal("the load report never reached the handler")
	}
	if cc.IsClosed() {
		t.Fatalf("node connection closed after a load report: %v", cc.Err())
	}
}
