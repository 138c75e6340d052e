package nodewire

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// idState is how many node ids a server keeps something for: a connection
// waiting for its ready, the newest registration order, a connection
// count.
type idState struct{ awaiting, newest, idConns int }

func (s *Server) idState() idState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return idState{len(s.awaiting), len(s.newest), len(s.idConns)}
}

// closedSnapshotHandler is a fakeHandler that, in Closed, takes what the
// server still keeps by node id, before reporting the close.
type closedSnapshotHandler struct {
	*fakeHandler
	srv     atomic.Pointer[Server]
	atClose chan idState // every Closed call's snapshot
}

func (h *closedSnapshotHandler) Closed(c *Conn, err error) {
	h.atClose <- h.srv.Load().idState()
	h.fakeHandler.Closed(c, err)
}

// An accepted connection that ends before its ready leaves nothing of its
// node id behind by the time the handler hears of its close: not as the
// connection waiting for its ready (a closed Conn kept by id for good),
// nor its order or count, whatever its id (one too long to be logged
// whole included).
func TestConnectionEndedBeforeReadyLeavesNoIDStateAtClosed(t *testing.T) {
	for name, id := range map[string]string{"short id": "n1", "long id": strings.Repeat("n", maxLoggedNodeID+10)} {
		t.Run(name, func(t *testing.T) {
			h := &closedSnapshotHandler{fakeHandler: orderedHandler(), atClose: make(chan idState, 4)}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := NewServer(ServerConfig{Handler: h})
			h.srv.Store(srv)
			serveErr := make(chan error, 1)
			// Owner: the test; ends at srv.Close (cleanup).
			go func() { serveErr <- srv.Serve(ln) }()
			t.Cleanup(func() {
				_ = srv.Close()
				if err := <-serveErr; err != nil {
					t.Errorf("Serve: %v", err)
				}
			})

			cc, _ := dial(t, DialConfig{Address: ln.Addr().String()}, id)
			sc := recvConn(t, h.registered, "Register")
			waitFor(t, "the registration to wait for its ready", func() bool {
				return srv.idState() == idState{awaiting: 1, newest: 1, idConns: 1}
			})
			_ = cc.Close() // never sends its ready
			if cl := recvClosed(t, h.fakeHandler); cl.c != sc {
				t.Fatalf("closed %p, want the registration's %p", cl.c, sc)
			}
			if got := <-h.atClose; got != (idState{}) {
				t.Fatalf("at Closed, the server still keeps by node id %+v, want nothing", got)
			}
		})
	}
}

var _ ServerHandler = (*closedSnapshotHandler)(nil)
