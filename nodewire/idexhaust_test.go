package nodewire

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// spendIDs makes the edge side's next stream its last: about 2^31 streams
// on one connection (five days at 5,000 requests/s).
func spendIDs(sc *Conn) {
	sess := sc.sess.Load()
	sess.mu.Lock()
	sess.nextID = ^uint32(0) - 3
	sess.mu.Unlock()
}

// echoUntilEOF is a node handler that answers nothing until the edge
// half-closes its stream, then closes its own side.
func echoUntilEOF(ctx context.Context, st *Stream, first *iop.Envelope) {
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	_ = st.CloseWrite()
}

// openSend opens a stream and sends its first frame.
func openSend(t *testing.T, sc *Conn, id string) (*Stream, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := sc.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	return st, st.Send(runRequest(id))
}

// Once its stream ids are spent, a connection opens no more streams,
// reads as closing (so no new work is routed to it) while the streams it
// opened finish, then closes so the node dials a fresh one. Before, it
// stayed open and ready with every new exchange failing, for as long as
// the process lived.
func TestStreamIDExhaustionDrainsThenCloses(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")
	serveClient(t, context.Background(), cc, echoUntilEOF)
	spendIDs(sc)

	last, err := openSend(t, sc, "last-id")
	if err != nil {
		t.Fatalf("the last id: %v", err)
	}
	if _, err := openSend(t, sc, "no-id-left"); !errors.Is(err, ErrStreamIDsExhausted) {
		t.Fatalf("an exchange past the last id: err = %v, want ErrStreamIDsExhausted", err)
	}
	if !sc.IsClosed() {
		t.Fatal("IsClosed is false with the ids spent: work would still be routed here")
	}
	select {
	case <-sc.Done():
		t.Fatalf("closed under a running stream: %v", sc.Err())
	case <-time.After(100 * time.Millisecond):
	}
	// The running stream finishes normally...
	if err := last.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = last.SetReadDeadline(time.Now().Add(waitLong))
	if _, err := last.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the last stream's end: %v, want EOF", err)
	}
	// ... and then the connection closes, saying why.
	select {
	case <-sc.Done():
	case <-time.After(waitLong):
		t.Fatal("the connection stayed open after its last stream ended")
	}
	if !errors.Is(sc.Err(), ErrStreamIDsExhausted) {
		t.Fatalf("close cause %v, want ErrStreamIDsExhausted", sc.Err())
	}
}

// A stream that never ends does not hold a spent connection open past
// idsDrainGrace.
func TestStreamIDExhaustionDrainIsBounded(t *testing.T) {
	old := idsDrainGrace
	idsDrainGrace = 300 * time.Millisecond
	t.Cleanup(func() { idsDrainGrace = old })
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")
	serveClient(t, context.Background(), cc, echoUntilEOF)
	spendIDs(sc)

	held, err := openSend(t, sc, "held")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openSend(t, sc, "no-id-left"); !errors.Is(err, ErrStreamIDsExhausted) {
		t.Fatalf("err = %v, want ErrStreamIDsExhausted", err)
	}
	select {
	case <-sc.Done():
	case <-time.After(waitLong):
		t.Fatal("a held stream kept the spent connection open past the drain bound")
	}
	_ = held.SetReadDeadline(time.Now().Add(waitLong))
	if _, err := held.Recv(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("the held stream after the close: %v, want a connection error", err)
	}
}

// With nothing of its own running, a spent connection closes at once.
func TestStreamIDExhaustionIdleClosesAtOnce(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")
	serveClient(t, context.Background(), cc, echoUntilEOF)
	sess := sc.sess.Load()
	sess.mu.Lock()
	sess.nextID = ^uint32(0) - 1 // past the last id already
	sess.mu.Unlock()
	if _, err := openSend(t, sc, "no-id-left"); err == nil {
		t.Fatal("an exchange without an id succeeded")
	}
	select {
	case <-sc.Done():
	case <-time.After(waitLong):
		t.Fatal("a spent, idle connection stayed open")
	}
	if !errors.Is(sc.Err(), ErrStreamIDsExhausted) {
		t.Fatalf("close cause %v, want ErrStreamIDsExhausted", sc.Err())
	}
}
