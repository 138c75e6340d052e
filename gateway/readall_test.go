package gateway

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"
)

// eofReader hands out its bytes in reads of at most step, and records
// whether the caller read on to EOF.
type eofReader struct {
	b    []byte
	step int
	eof  bool
}

func (r *eofReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		r.eof = true
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.b)
	r.b = r.b[n:]
	return n, nil
}

// readAll returns exactly what io.ReadAll returns, whatever the declared
// length says (right, too small, too large, unknown) and however the bytes
// arrive, and always reads to EOF.
func TestReadAllMatchesReadAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fill := rand.NewChaCha8([32]byte{1, 2})
	for i := range 2000 {
		n := rng.IntN(3 * eagerBody)
		if i%4 == 0 {
			n = rng.IntN(2048)
		}
		// Random bytes from one Read: a call per byte took most of the
		// test's 45 s under -race, and the bytes' values are no part of
		// what is checked.
		body := make([]byte, n)
		_, _ = fill.Read(body)
		declared := int64(n)
		switch rng.IntN(4) {
		case 0:
			declared = -1
		case 1:
			declared = int64(rng.IntN(n + 1))
		case 2:
			declared = int64(n + rng.IntN(eagerBody))
		}
		r := &eofReader{b: body, step: 1 + rng.IntN(16<<10)}
		got, err := readAll(r, declared)
		if err != nil || !bytes.Equal(got, body) || !r.eof {
			t.Fatalf("%d bytes declared as %d, read %d at a time: got %d bytes, %v, EOF read %v", n, declared, r.step, len(got), err, r.eof)
		}
	}
}

// A body of known length up to eagerBody costs one allocation of its size
// (and a byte for the EOF probe); a larger one a few doublings, about
// twice the body in all; io.ReadAll spends 2.5 times a 32 KiB body.
func TestReadAllAllocation(t *testing.T) {
	for _, n := range []int{300, 32 << 10, eagerBody, 1 << 20} {
		body := bytes.Repeat([]byte("x"), n)
		var allocs float64
		bytesPer := allocated(func() {
			allocs = testing.AllocsPerRun(20, func() {
				r := &eofReader{b: body, step: 16 << 10}
				if got, err := readAll(r, int64(n)); err != nil || len(got) != n {
					t.Fatalf("readAll: %d bytes, %v", len(got), err)
				}
			})
		}) / 21
		stdBytes := allocated(func() {
			for range 21 {
				_, _ = io.ReadAll(&eofReader{b: body, step: 16 << 10})
			}
		}) / 21
		t.Logf("%d bytes: %.0f allocations, %d bytes (io.ReadAll %d)", n, allocs, bytesPer, stdBytes)
		switch {
		case n <= eagerBody && allocs > 3: // the slice, the EOF probe's byte, and the reader itself
			t.Fatalf("%d bytes of declared length: %.0f allocations", n, allocs)
		case bytesPer > 2*uint64(n)+eagerBody:
			t.Fatalf("%d bytes: %d bytes allocated", n, bytesPer)
		}
	}
}

// allocated is the heap bytes allocated while f runs.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// A read error ends readAll with the bytes so far and that error.
func TestReadAllError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(boom))
	got, err := readAll(r, 10)
	if !errors.Is(err, boom) || string(got) != "abc" {
		t.Fatalf("got %q, %v", got, err)
	}
}
