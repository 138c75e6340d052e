package edgeapp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A non-streamed Responses answer too large to hold (past 16 MiB, relayed
// as it comes) also reaches its client only once its id is in Redis: the
// held part, which carries the id, waits for the id's write. Redis holds
// the edge's writes for 3 s from the moment the provider begins to
// answer, under the ledger's 5 s timeout.
func TestAnswerPastTheHoldWaitsForItsIDInRedis40m(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	const id = "resp_big0000000000000000000000000001"
	prefix := `{"id":"` + id + `","created_at":1727000000,"incomplete_details":null,"instructions":"`
	big := func(w http.ResponseWriter, r *http.Request) {
		if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "3000", "WRITE").Err(); err != nil {
			t.Errorf("pause: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, prefix)
		pad := strings.Repeat("x", 64<<10)
		for n := 0; n < 16<<20+len(pad); n += len(pad) {
			if _, err := io.WriteString(w, pad); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `","metadata":null,"model":"`+respTarget+`","object":"response","output":[],"status":"completed"}`)
	}
	newBig := func(name string) *storingVLLM { return answeringVLLM(t, name, big) }
	a, b := newBig("a"), newBig("b")
	cfg := clusterResponsesCfg(rs.Addr, a, b)
	cfg.Cluster.Redis.LeaseTTLSec, cfg.Cluster.Redis.TimeoutMS = 25, 5000
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{})
	stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "ta", Getenv: respEnv})
	e.WaitReady(t, "a", 10*time.Second)

	// 16 MiB through upstream, node and edge: minutes, not seconds, for a
	// loaded box under the race detector.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/responses", strings.NewReader(responsesBody("")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	head := make([]byte, len(prefix))
	if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != prefix {
		t.Fatalf("answer begins %q (%v), want %q", head, err, prefix)
	}
	if rdb.Exists(context.Background(), "dep:resp:"+id).Val() != 1 {
		t.Fatalf("the answer's first bytes (id %s) reached the client before the id reached Redis", id)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n < 16<<20 {
		t.Fatalf("the rest of the answer: %d bytes, %v", n, err)
	}
}
