package nodeagent

import (
	"sync"
	"sync/atomic"
	"testing"
)

// A name refused an address is asked to look again by the release of that
// address, however the refusal and the release interleave: a name whose
// other session is up looks nothing up unless asked, so a lost wake-up
// leaves the freed address unserved for as long as that session lasts.
func TestRefusedClaimIsWokenByAnyLaterRelease(t *testing.T) {
	const key = "10.0.0.1:7000"
	holder := edgeEntry{index: 0, text: "10.0.0.1:7000"}
	name := edgeEntry{index: 1, text: "edge.example:7000"}
	for i := range 20000 {
		c := &edgeClaims{owner: map[string]edgeEntry{}, refused: map[edgeEntry]func(){}}
		if _, ok := c.claim(key, holder); !ok {
			t.Fatal("first claim refused")
		}
		var woken atomic.Bool
		var refused bool
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		// Owner: this iteration; each returns after one call.
		go func() {
			defer wg.Done()
			<-start
			_, ok := c.claimOrWait(key, name, func() { woken.Store(true) })
			refused = !ok
		}()
		// Owner: this iteration.
		go func() {
			defer wg.Done()
			<-start
			c.release(key, holder)
		}()
		close(start)
		wg.Wait()
		c.mu.Lock()
		_, held := c.owner[key]
		c.mu.Unlock()
		if refused && !held && !woken.Load() {
			t.Fatalf("iteration %d: the name was refused, the address was then released, and the name was never asked to look again", i)
		}
	}
}
