package edgeapp

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A reload's new credentials apply at once, not after the nodes'
// refreshes: a key revoked by a reload is refused while a node that does
// not answer its refresh is still being waited for (up to 15 s per node
// before, with the old key valid all along).
func TestReloadRevokesKeyBeforeRefreshes(t *testing.T) {
	const base = `
listen:
  http: 127.0.0.1:0
  node: 127.0.0.1:0
auth:
  api_keys: [k1, k2]
` + oneNodeYAML
	file, cfg := edgeFile(t, base)
	e := serveEdge(t, cfg, Options{HealthInterval: -1, ConfigFile: file})

	// Node a registers, becomes ready and then never answers a refresh.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, resp, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: e.NodeAddr},
		&iop.RegisterRequest{ProtocolVersion: nodewire.ProtocolVersion, NodeId: "a", Token: "tok"})
	if err != nil || !resp.GetAccepted() {
		t.Fatalf("register: %v %v", resp, err)
	}
	defer cc.Close()
	if err := cc.Ready(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	refreshed := make(chan struct{}, 1)
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	// Owner: this test; ends when stop is called or the connection closes.
	go func() {
		defer close(served)
		_ = cc.Serve(sctx, func(hctx context.Context, _ *nodewire.Stream, first *iop.Envelope) {
			if first.GetNodeConfigRefreshRequest() != nil {
				refreshed <- struct{}{}
			}
			<-hctx.Done()
		})
	}()
	defer func() { stop(); <-served }()

	models := func(key string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.HTTPAddr+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := models("k2"); got != http.StatusOK {
		t.Fatalf("k2 before the reload: %d", got)
	}

	// Drop k2 and change a's capacity, so that a gets a refresh.
	next := strings.Replace(base, "[k1, k2]", "[k1]", 1)
	next = strings.Replace(next, "capacity: 1", "capacity: 2", 1)
	if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan struct{})
	// Owner: this test; ends when the refresh times out or the edge closes.
	go func() {
		defer close(reloaded)
		_, _ = e.Reload()
	}()
	select {
	case <-refreshed:
	case <-time.After(10 * time.Second):
		t.Fatal("node a never got its refresh")
	}
	if got := models("k2"); got != http.StatusUnauthorized {
		t.Errorf("k2 while the reload waits for node a: %d, want 401 (revoked)", got)
	}
	if got := models("k1"); got != http.StatusOK {
		t.Errorf("k1 while the reload waits for node a: %d, want 200", got)
	}
	e.Close() // ends the refresh's wait
	<-reloaded
}
