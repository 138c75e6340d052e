package nodewire

import (
	"testing"
	"time"
)

// watchFired arms st.afterReadable and returns a channel closed when the
// watch runs.
func watchFired(t *testing.T, st *muxStream) <-chan struct{} {
	t.Helper()
	fired := make(chan struct{})
	if !st.afterReadable(func() { close(fired) }) {
		t.Fatal("afterReadable on a stream with nothing to read: false, want armed")
	}
	return fired
}

func mustFire(t *testing.T, what string, fired <-chan struct{}) {
	t.Helper()
	select {
	case <-fired:
	case <-time.After(waitLong):
		t.Fatalf("%s: the watch did not run", what)
	}
}

func mustNotFire(t *testing.T, what string, fired <-chan struct{}) {
	t.Helper()
	select {
	case <-fired:
		t.Fatalf("%s: the watch ran", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// openPair opens a stream on the server side and accepts it on the client
// side, the first byte ("x") already read, so the accepted stream has
// nothing to read.
func openPair(t *testing.T, client, server *muxSession) (a, b *muxStream) {
	t.Helper()
	a, err := server.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b = acceptWithin(t, client)
	if n, err := b.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("first byte: %d, %v", n, err)
	}
	return a, b
}

func TestMuxAfterReadable(t *testing.T) {
	client, server := muxPair(t)

	t.Run("data", func(t *testing.T) {
		a, b := openPair(t, client, server)
		fired := watchFired(t, b)
		mustNotFire(t, "nothing sent", fired)
		// A read deadline passing is not readability.
		_ = b.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		mustNotFire(t, "deadline passed", fired)
		_ = b.SetReadDeadline(time.Time{})
		if _, err := a.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		mustFire(t, "data", fired)
		// Readable now: nothing is armed.
		if b.afterReadable(func() { t.Error("armed on a readable stream ran") }) {
			t.Fatal("afterReadable with unread data: true, want false")
		}
		if b.stopWatch() {
			t.Fatal("stopWatch after the watch ran: true, want false")
		}
	})
	t.Run("fin", func(t *testing.T) {
		a, b := openPair(t, client, server)
		fired := watchFired(t, b)
		_ = a.Close()
		mustFire(t, "FIN", fired)
	})
	t.Run("reset by the peer", func(t *testing.T) {
		a, b := openPair(t, client, server)
		fired := watchFired(t, b)
		a.Reset()
		mustFire(t, "peer reset", fired)
	})
	t.Run("own reset", func(t *testing.T) {
		_, b := openPair(t, client, server)
		fired := watchFired(t, b)
		b.Reset()
		mustFire(t, "own reset", fired)
	})
	t.Run("stopped", func(t *testing.T) {
		a, b := openPair(t, client, server)
		fired := watchFired(t, b)
		if !b.stopWatch() {
			t.Fatal("stopWatch on an armed watch: false, want true")
		}
		if _, err := a.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		mustNotFire(t, "disarmed", fired)
	})
	t.Run("session closes", func(t *testing.T) {
		c2, s2 := muxPair(t)
		_, b := openPair(t, c2, s2)
		fired := watchFired(t, b)
		s2.Close()
		mustFire(t, "connection closed", fired)
	})
}
