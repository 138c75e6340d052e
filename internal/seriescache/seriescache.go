// Package seriescache keeps the children of Prometheus metric vectors by
// their label values, so that recording one does not hash and look up its
// labels in the vector (WithLabelValues) each time: on the request path
// that lookup was a few per cent of the edge's CPU.
package seriescache

import (
	"sync"
	"sync/atomic"
)

// Cache maps label values K to a vector's child V. Reads are lock-free
// (an immutable map behind an atomic pointer); a new key copies the map,
// which happens once per label tuple. It holds what the vector already
// holds, so it is bounded as the labels are; it must not be used for a
// vector whose children are ever deleted (a deleted child, still cached,
// would count where no scrape sees it). The zero value is ready to use.
type Cache[K comparable, V any] struct {
	mu sync.Mutex // serialises adding a key (copy and store)
	m  atomic.Pointer[map[K]V]
}

// Get returns k's child, made with child the first time k is asked for.
func (c *Cache[K, V]) Get(k K, child func(K) V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	size := 1
	if old != nil {
		size += len(*old)
	}
	m := make(map[K]V, size)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	v := child(k)
	m[k] = v
	c.m.Store(&m)
	return v
}
