package dispatch

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/config"
)

func benchDispatcher(b *testing.B, cfg *config.Edge, nodes ...string) *Dispatcher {
	b.Helper()
	d := New(cfg, Options{Bus: dropBus{}, Metrics: NewMetrics(prometheus.NewRegistry())})
	f := &fixture{t: b, d: d}
	for _, n := range nodes {
		f.up(n)
	}
	return d
}

// BenchmarkAcquireRelease: uncontended fast path on one live provider.
func BenchmarkAcquireRelease(b *testing.B) {
	cfg := buildCfg(b, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/p"}}})
	d := benchDispatcher(b, cfg, "a")
	defer d.Close()
	ctx := context.Background()
	req := Request{Model: "m", PromptTokens: 10}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, err := d.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(ReasonCompleted)
	}
}

// BenchmarkAcquireReleaseWith1000Waiters: the fast path (acquire, release)
// on model "m" while 1000 requests wait in the queue.
//
//   - disjoint: the waiters are for model "busy", whose only provider is
//     full and shares nothing with "m"; each release of "m"'s lease still
//     walks the queue looking for a waiter of its provider.
//   - shared-long-full: the waiters are long requests for "m" itself and
//     the provider's long slot is held, so a normal request fits but no
//     waiter does.
func BenchmarkAcquireReleaseWith1000Waiters(b *testing.B) {
	const waiters = 1000
	cases := []struct {
		name   string
		waitOn Request
		block  Request // taken once before the waiters queue
	}{
		{"disjoint", Request{Model: "busy"}, Request{Model: "busy"}},
		{"shared-long-full", Request{Model: "m", PromptTokens: 1000}, Request{Model: "m", PromptTokens: 1000}},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			cfg := buildCfg(b,
				[]tNode{{id: "a", provs: []tProv{{name: "p", cap: 2, long: 1}, {name: "q", cap: 1}}}},
				[]tModel{
					{name: "m", long: 100, maxQueue: 2 * waiters, timeout: 3600, cands: []string{"a/p"}},
					{name: "busy", maxQueue: 2 * waiters, timeout: 3600, cands: []string{"a/q"}},
				})
			d := benchDispatcher(b, cfg, "a")
			blocker := mustAcquire(b, d, bc.block)
			var wg sync.WaitGroup
			errs := make(chan error, waiters)
			for range waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := d.Acquire(context.Background(), bc.waitOn)
					errs <- err
				}()
			}
			defer func() {
				d.Close()
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != ErrDispatcherShutdown {
						b.Errorf("waiter: %v", err)
					}
				}
			}()
			waitFor(b, "waiters queued", func() bool { return pendingOf(d.Status(), bc.waitOn.Model) == waiters })
			benchGrantsPastWaiters(b, d, Request{Model: "m", PromptTokens: 10}, bc.waitOn.Model, waiters)
			_ = blocker
		})
	}
}

// benchGrantsPastWaiters times Acquire and Release of req on d while
// waiting requests of model wait, none of which may be served meanwhile
// (the grants must pass them over).
func benchGrantsPastWaiters(b *testing.B, d *Dispatcher, req Request, model string, waiting int) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, err := d.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(ReasonCompleted)
	}
	b.StopTimer()
	if got := pendingOf(d.Status(), model); got != waiting {
		b.Fatalf("pending = %d: a waiter was served", got)
	}
}
