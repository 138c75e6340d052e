package nodewire

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// snapshotsAnswer is a command answer of n empty provider snapshots: two
// bytes each on the wire.
func snapshotsAnswer(n int) *iop.Envelope {
	resp := &iop.NodeCommandResponse{Providers: make([]*iop.ProviderSnapshot, n)}
	for i := range resp.Providers {
		resp.Providers[i] = &iop.ProviderSnapshot{}
	}
	return &iop.Envelope{Body: &iop.Envelope_NodeCommandResponse{NodeCommandResponse: resp}}
}

// A node's frame that would decode into millions of structs is refused on
// the edge from a scan of its tags, before it is decoded: 4 MiB of empty
// provider snapshots used to cost the edge hundreds of MB (a full 16 MiB
// frame, 1.7 GB). The node's side, which decodes what the edge sent after
// validating it, has no such bound.
func TestNodeFrameFanoutRefusedBeforeDecoding(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	const n = 2 << 20 // 2 Mi snapshots, 4 MiB
	answer := snapshotsAnswer(n)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	// Owner: the test; ends when ctx is cancelled or the connection closes.
	go func() {
		defer close(served)
		_ = cc.Serve(ctx, func(hctx context.Context, st *Stream, _ *iop.Envelope) {
			// Encoding 2 Mi messages takes seconds on a loaded machine
			// under -race: the deadlines leave room for it.
			_ = st.SetWriteDeadline(time.Now().Add(4 * waitLong))
			_ = st.Send(answer)
			<-hctx.Done()
		})
	}()
	defer func() { cancel(); <-served }()

	st, err := sc.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	_ = st.SetWriteDeadline(time.Now().Add(waitLong))
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_NodeCommandRequest{NodeCommandRequest: &iop.NodeCommandRequest{}}}); err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(4 * waitLong))
	// Measured from the answer's first bytes on: the node encodes the
	// whole frame (megabytes of buffer) before it writes any of it, and on
	// a loaded machine that encoding went on inside the measurement.
	arrived := make(chan struct{})
	if st.AfterReadable(func() { close(arrived) }) {
		select {
		case <-arrived:
		case <-time.After(4 * waitLong):
			t.Fatalf("no byte of the answer within %v", 4*waitLong)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = st.Recv()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errFanout) || !errors.Is(err, ErrProtocol) {
		t.Fatalf("Recv of %d snapshots: %v, want a protocol violation (errFanout)", n, err)
	}
	// The 4 MiB frame itself is read; nothing like its decoding is
	// allocated (the node's sending goroutine allocates nothing here: the
	// answer was built and encoded before).
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("refusing the frame allocated %d MiB", got>>20)
	}
}

// Under the bound, and on frames too small to scan, nothing changes: the
// scan counts exactly the elements the decoder would allocate.
func TestCheckFanoutCounts(t *testing.T) {
	small, err := proto.Marshal(snapshotsAnswer(10))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFanout(small, 1); err != nil {
		t.Fatalf("a %d-byte frame was scanned: %v", len(small), err)
	}
	big, err := proto.Marshal(snapshotsAnswer(40000)) // 80 KB: scanned
	if err != nil {
		t.Fatal(err)
	}
	// The response (the envelope's body) and 40,000 snapshots.
	if err := checkFanout(big, 40001); err != nil {
		t.Fatalf("exactly at the bound: %v", err)
	}
	if err := checkFanout(big, 40000); !errors.Is(err, errFanout) {
		t.Fatalf("one over the bound: %v, want errFanout", err)
	}
	if err := checkFanout(big, 0); err != nil {
		t.Fatalf("no bound: %v", err)
	}
	if err := checkFanout(append(big[:len(big):len(big)], 0xff), 40001); err != nil {
		t.Fatalf("a malformed tail is the decoder's to refuse: %v", err)
	}
}

// Elements of a repeated string field count as well: an empty string is
// two bytes of frame and a string header of memory each.
func TestCheckFanoutCountsRepeatedStrings(t *testing.T) {
	env := &iop.Envelope{Body: &iop.Envelope_RegisterRequest{RegisterRequest: &iop.RegisterRequest{
		AdapterTypes: make([]string, 40000), // 80 KB: scanned
	}}}
	b, err := proto.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	// The request (the envelope's body) and 40,000 strings.
	if err := checkFanout(b, 40001); err != nil {
		t.Fatalf("exactly at the bound: %v", err)
	}
	if err := checkFanout(b, 40000); !errors.Is(err, errFanout) {
		t.Fatalf("one over the bound: %v, want errFanout", err)
	}
}
