package seriescache

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Each key's child is made once, however many goroutines ask for it at
// the same time, and every caller of a key gets that one child.
func TestGetMakesEachChildOnce(t *testing.T) {
	var c Cache[int, *int]
	var made [8]atomic.Int32
	var wg sync.WaitGroup
	got := make([][8]*int, 16)
	for g := range got {
		wg.Add(1)
		// Owner: this test; stops after its 8×50 Gets.
		go func() {
			defer wg.Done()
			for range 50 {
				for k := range 8 {
					v := c.Get(k, func(k int) *int {
						made[k].Add(1)
						return new(int)
					})
					if got[g][k] != nil && got[g][k] != v {
						t.Errorf("key %d: two children", k)
					}
					got[g][k] = v
				}
			}
		}()
	}
	wg.Wait()
	for k := range made {
		if n := made[k].Load(); n != 1 {
			t.Errorf("key %d: child made %d times, want 1", k, n)
		}
		for g := range got {
			if got[g][k] != got[0][k] {
				t.Errorf("key %d: goroutines %d and 0 got different children", k, g)
			}
		}
	}
}

// A key already cached costs no allocation and no lock.
func TestGetCachedAllocatesNothing(t *testing.T) {
	var c Cache[string, int]
	c.Get("a", func(string) int { return 1 })
	c.Get("b", func(string) int { return 2 })
	if n := testing.AllocsPerRun(100, func() {
		if c.Get("b", func(string) int { return -1 }) != 2 {
			t.Fatal("wrong child")
		}
	}); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}
