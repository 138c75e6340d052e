package config

// DefaultGCHeapFloorMB is runtime.gc_heap_floor_mb when unset.
const DefaultGCHeapFloorMB = 64

// maxGCHeapFloorMB bounds runtime.gc_heap_floor_mb (16 GiB): a larger
// floor is a typo, not a tuning.
const maxGCHeapFloorMB = 16 << 10

// Runtime tunes the Go runtime of the process. Read at start only.
type Runtime struct {
	// GCHeapFloorMB bounds the garbage collector's heap floor
	// (internal/gcfloor): while the live heap is small, the collector lets
	// the heap grow by what the process allocates in a quarter second at
	// its current rate, at most this many MiB, so that under load it runs
	// a few times a second instead of every couple of MiB. Above it GOGC
	// rules as usual, and GOMEMLIMIT still caps the heap. Unset means 64;
	// 0 turns the floor off.
	GCHeapFloorMB *int `mapstructure:"gc_heap_floor_mb"`
}

// GCHeapFloorBytes is gc_heap_floor_mb in bytes (after normalize).
func (r *Runtime) GCHeapFloorBytes() uint64 {
	if r.GCHeapFloorMB == nil || *r.GCHeapFloorMB <= 0 {
		return 0
	}
	return uint64(*r.GCHeapFloorMB) << 20
}

func (r *Runtime) normalize(p *problems) {
	if r.GCHeapFloorMB == nil {
		v := DefaultGCHeapFloorMB
		r.GCHeapFloorMB = &v
	}
	if v := *r.GCHeapFloorMB; v < 0 || v > maxGCHeapFloorMB {
		p.add("runtime.gc_heap_floor_mb must be between 0 and %d (0 turns the floor off)", maxGCHeapFloorMB)
	}
}
