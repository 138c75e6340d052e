package dispatch

import (
	"context"
	"strconv"
	"sync"
	"testing"
)

// BenchmarkPumpPinned37b: acquire and release on b/p (the release pumps
// b) while n follow-ups wait pinned to a/p (full) in the same model's
// queue. The pump never walks waiters pinned to another provider, so the
// cost does not grow with n.
func BenchmarkPumpPinned37b(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run("pinned="+strconv.Itoa(n), func(b *testing.B) {
			cfg := buildCfg(b, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}},
				[]tModel{{name: "m", maxQueue: 2*n + 1, timeout: 3600, cands: []string{"a/p", "b/p"}}})
			d := benchDispatcher(b, cfg, "a", "b")
			la := mustAcquire(b, d, Request{Model: "m"})
			d.RememberResponse("resp_a", la)
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				// Owner: the benchmark. Stops when Close fails the waiter.
				go func() {
					defer wg.Done()
					_, _ = d.Acquire(context.Background(), Request{Model: "m", PreviousResponseID: "resp_a"})
				}()
			}
			defer func() {
				d.Close()
				wg.Wait()
			}()
			waitFor(b, "follow-ups queued", func() bool { return pendingOf(d.Status(), "m") == n })
			benchGrantsPastWaiters(b, d, Request{Model: "m"}, "m", n)
		})
	}
}
