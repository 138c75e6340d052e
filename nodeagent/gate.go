package nodeagent

import "sync"

// gate is an adapter instance's local capacity gate, shared by runs and
// tunnels. It is defense in depth against work that bypasses the Edge
// queue, not a second admission queue: over capacity fails at once.
type gate struct {
	mu       sync.Mutex
	capacity int // guarded by mu; 0 or less means unlimited
	inFlight int // guarded by mu
}

func (g *gate) tryAcquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.capacity > 0 && g.inFlight >= g.capacity {
		return false
	}
	g.inFlight++
	return true
}

func (g *gate) release() {
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
}

func (g *gate) setCapacity(n int) {
	g.mu.Lock()
	g.capacity = n
	g.mu.Unlock()
}

func (g *gate) state() (capacity, inFlight int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.capacity, g.inFlight
}
