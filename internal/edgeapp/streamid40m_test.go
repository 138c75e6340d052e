package edgeapp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A stream's id is shared (and waited for) once, at its first event: the
// event after it, response.completed, which names the id again,
// neither queue it for Redis again nor wait for a write. The
// upstream sends response.completed only once the test has read the first
// event and deleted the id's key: a second write would bring the key back
// before the client has the stream's end.
func TestStreamIDSharedOnce40m(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	const id = "resp_once000000000000000000000000001"
	rest := make(chan struct{})
	resp := `{"id":"` + id + `","created_at":1727000000,"model":"` + respTarget + `","object":"response","output":[],"status":"%s"}`
	upstream := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		event := func(name, data string) {
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
			w.(http.Flusher).Flush()
		}
		event("response.created", `{"response":`+fmt.Sprintf(resp, "in_progress")+`,"sequence_number":0,"type":"response.created"}`)
		select {
		case <-rest:
		case <-r.Context().Done():
			return
		}
		event("response.completed", `{"response":`+fmt.Sprintf(resp, "completed")+`,"sequence_number":1,"type":"response.completed"}`)
	}
	newUp := func(name string) *storingVLLM { return answeringVLLM(t, name, upstream) }
	e := stack.StartEdge(t, clusterResponsesCfg(rs.Addr, newUp("a"), newUp("b")), stack.EdgeOptions{})
	stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "ta", Getenv: respEnv})
	e.WaitReady(t, "a", 10*time.Second)

	r, err := http.Post(e.URL+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"m","input":"Tell me more.","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", r.StatusCode)
	}
	br := bufio.NewReader(r.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before its first event: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	ctx := context.Background()
	if n := rdb.Del(ctx, "dep:resp:"+id).Val(); n != 1 {
		t.Fatalf("the id was not in Redis when its first event reached the client (%d deleted)", n)
	}
	close(rest)
	body, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(body), "response.completed") {
		t.Fatalf("the rest of the stream: %q, %v", body, err)
	}
	if rdb.Exists(ctx, "dep:resp:"+id).Val() != 0 {
		t.Fatal("the id was written to Redis again by a later event")
	}
}
