package edgeapp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
)

// pairPausedAtB is startResponsesPair on a fresh Redis (rdb, a client of
// it), whose writes b's next request pauses for 500 ms as it is served:
// under the ledger's 1 s timeout, so the id's write waits and then lands.
func pairPausedAtB(t *testing.T) (rdb *redis.Client, a *storingVLLM, edgeA, edgeB *stack.Edge) {
	t.Helper()
	rs := testredis.Start(t)
	rdb = rs.Client(t)
	a, b := newStoringVLLM(t, "a"), newStoringVLLM(t, "b")
	edgeA, edgeB = startResponsesPair(t, rs.Addr, a, b, 0)
	pause := func() {
		if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "500", "WRITE").Err(); err != nil {
			t.Errorf("pause: %v", err)
		}
	}
	b.beforeNext.Store(&pause)
	return rdb, a, edgeA, edgeB
}

// A non-streamed Responses answer reaches its client only once its id is
// in Redis: a follow-up the client sends at once through another edge
// goes to the provider holding the response. Redis holds the edge's
// writes for 500 ms as the answer is made (under the ledger's 1 s
// timeout). Before, the answer went out at once and the id's write
// followed it: the follow-up, sent within that window, went to a (vLLM's
// 404).
func TestAnswerWaitsForItsIDInRedis39(t *testing.T) {
	rdb, a, edgeA, edgeB := pairPausedAtB(t)
	ctx := context.Background()
	id := startOnB(t, edgeA, a)
	if rdb.Exists(ctx, "dep:resp:"+id).Val() != 1 {
		t.Fatalf("the answer %s reached its client before its id reached Redis", id)
	}
	status, next, body := askResponses(t, edgeB, id)
	if status != http.StatusOK || !strings.HasPrefix(next, "resp_b") {
		t.Fatalf("the follow-up sent at once through the other edge: %d %q: %s", status, next, body)
	}
	if n := a.notFound.Load(); n != 0 {
		t.Errorf("a answered %d follow-ups 404", n)
	}
}

// A streamed Responses answer's first event, which carries its id,
// reaches the client only once the id is in Redis: the client never holds
// an id another edge could not look up. Redis holds the edge's writes for
// 500 ms as b answers.
func TestStreamWaitsForItsIDInRedis39(t *testing.T) {
	rdb, a, edgeA, edgeB := pairPausedAtB(t)
	ctx := context.Background()
	a.busyNext.Store(true) // the stream fails over to b
	resp, err := http.Post(edgeA.URL+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"m","input":"Tell me more.","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var id string
	for id == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before its first event: %v", err)
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Response.ID == "" {
			t.Fatalf("first event %q: %v", data, err)
		}
		id = ev.Response.ID
		if rdb.Exists(ctx, "dep:resp:"+id).Val() != 1 {
			t.Fatalf("the stream's first event (id %s) reached its client before the id reached Redis", id)
		}
	}
	if !strings.HasPrefix(id, "resp_b") {
		t.Fatalf("stream answered by %s, want b", id)
	}
	_, _ = io.Copy(io.Discard, br)
	status, next, body := askResponses(t, edgeB, id)
	if status != http.StatusOK || !strings.HasPrefix(next, "resp_b") {
		t.Fatalf("the follow-up through the other edge: %d %q: %s", status, next, body)
	}
}
