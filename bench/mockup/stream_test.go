package mockup

import (
	"io"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The pacer's heap keeps its order and every stream's index through
// pushes, reschedules and removals.
func TestPacerHeap(t *testing.T) {
	p := &pacer{}
	rng := rand.New(rand.NewPCG(1, 2))
	var in []*stream
	check := func() {
		t.Helper()
		for i, e := range p.heap {
			if e.s.idx != i || e.due != e.s.due {
				t.Fatalf("slot %d: idx %d due %d/%d", i, e.s.idx, e.due, e.s.due)
			}
			if i > 0 && p.heap[(i-1)/2].due > e.due {
				t.Fatalf("slot %d: due %d under %d", i, e.due, p.heap[(i-1)/2].due)
			}
		}
	}
	for range 2000 {
		switch op := rng.IntN(4); {
		case op < 2 || len(in) == 0:
			s := &stream{idx: -1, due: rng.Int64N(1000)}
			p.push(s)
			in = append(in, s)
		case op == 2:
			s := in[rng.IntN(len(in))]
			s.due = rng.Int64N(1000)
			p.reschedule(s)
		default:
			k := rng.IntN(len(in))
			p.remove(in[k])
			if in[k].idx != -1 {
				t.Fatal("removed stream keeps its index")
			}
			in = slices.Delete(in, k, k+1)
		}
		check()
	}
	var order []int64
	for len(p.heap) > 0 {
		order = append(order, p.heap[0].due)
		p.remove(p.heap[0].s)
		check()
	}
	if !slices.IsSorted(order) || len(order) != len(in) {
		t.Fatalf("popped %d of %d, sorted %v", len(order), len(in), slices.IsSorted(order))
	}
}

// A reader that takes nothing ends its stream after stallTimeout, and the
// connection is closed.
func TestStalledReaderEnds(t *testing.T) {
	// The pacer reads stallTimeout: change it only while no pacer runs.
	waitPacerIdle(t)
	defer func(d time.Duration) { waitPacerIdle(t); stallTimeout = d }(stallTimeout)
	stallTimeout = 300 * time.Millisecond
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	base := streamsInFlight.Load()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"stream":true}`
	_, _ = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Bench-Chunks: 100000\r\nX-Bench-Interval-Ms: 0\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body)
	waitInFlight(t, base+1)
	// Not reading: the socket buffers fill, then the stall times out.
	deadline := time.Now().Add(10 * time.Second)
	for streamsInFlight.Load() != base {
		if time.Now().After(deadline) {
			t.Fatal("stalled stream still in flight")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The mock closed its end: draining what was buffered ends in EOF.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("after the stall: %v, want EOF", err)
	}
}

func waitPacerIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pace.mu.Lock()
		running := pace.running
		pace.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("pacer still running")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Writing a due chunk allocates nothing: the pacer's per-chunk path.
func TestPacerServeAllocs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fd, ok := rawFD(conn)
	if !ok {
		t.Skip("no raw descriptor on this platform")
	}
	start := time.Now()
	s := &stream{conn: conn, fd: fd, start: start, interval: 20 * time.Millisecond, chunks: 1 << 30, tail: streamTail(1<<30, true), next: 1, idx: -1, done: make(chan struct{})}
	p := &pacer{scratch: make([]byte, 0, scratchSize)}
	p.push(s)
	now := start
	allocs := testing.AllocsPerRun(200, func() {
		now = now.Add(s.interval)
		p.serve(s, now)
	})
	if allocs != 0 || s.next < 200 || s.ended {
		t.Fatalf("%.1f allocations per chunk, next %d, ended %v (%v)", allocs, s.next, s.ended, s.err)
	}
}
