package nodewire

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"
)

// Failed-credential delays: a registration refused for its credentials (or
// an unknown node id) waits before its answer, 250 ms doubling with each
// further failure up to 5 s, per node id and source address. The real node,
// dialing from its own address, is never slowed by someone guessing from
// elsewhere; an entry is forgotten after failureMemory without failures or
// when that key registers successfully.
const (
	failureBaseDelay = 250 * time.Millisecond
	failureMaxDelay  = 5 * time.Second
	failureMemory    = 10 * time.Minute
	// maxFailureKeys bounds the table; the least recently failing key is
	// evicted first.
	maxFailureKeys = 4096
)

type failureDelays struct {
	mu    sync.Mutex
	order *list.List                   // guarded by mu: of *failureEntry, most recent at the front
	byKey map[failureKey]*list.Element // guarded by mu
}

// failureKey is a node id and a source. The id is the peer's own text (up
// to a registration frame's size) and is kept as its digest, so a full
// table costs a fixed size per entry whatever ids were sent.
type failureKey struct {
	id  [sha256.Size]byte
	src string // sourceOf: an IPv4 address or an IPv6 /64
}

func newFailureKey(nodeID, src string) failureKey {
	return failureKey{id: sha256.Sum256([]byte(nodeID)), src: src}
}

type failureEntry struct {
	key   failureKey
	count int
	last  time.Time
}

func newFailureDelays() *failureDelays {
	return &failureDelays{order: list.New(), byKey: map[failureKey]*list.Element{}}
}

// fail records a failure of key and returns how long its answer waits.
func (f *failureDelays) fail(key failureKey) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	var e *failureEntry
	if el := f.byKey[key]; el != nil {
		e = el.Value.(*failureEntry)
		if now.Sub(e.last) > failureMemory {
			e.count = 0
		}
		f.order.MoveToFront(el)
	} else {
		if f.order.Len() >= maxFailureKeys {
			old := f.order.Back()
			f.order.Remove(old)
			delete(f.byKey, old.Value.(*failureEntry).key)
		}
		e = &failureEntry{key: key}
		f.byKey[key] = f.order.PushFront(e)
	}
	e.count++
	e.last = now
	d := failureBaseDelay << min(e.count-1, 5)
	return min(d, failureMaxDelay)
}

// forget drops key after a successful registration.
func (f *failureDelays) forget(key failureKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if el := f.byKey[key]; el != nil {
		f.order.Remove(el)
		delete(f.byKey, key)
	}
}
