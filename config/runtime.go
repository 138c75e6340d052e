package config

// DefaultGCHeapFloorMB is runtime.gc_heap_floor_mb when unset.
const DefaultGCHeapFloorMB = 64

// maxGCHeapFloorMB bounds runtime.gc_heap_floor_mb (16 GiB): a larger
// floor is a typo, not a tuning.
const maxGCHeapFloorMB = 16 << 10

// Runtime tunes the Go runtime of the process. Read at start only.
type Runtime struct {
	// GCHeapFloorMB lets the heap grow to this many MiB before the garbage
	// collector runs while the live heap is small (internal/gcfloor): at
	// moderate load the collector then runs tens of times less often, for
	// at most this much more memory. Above it GOGC rules as usual, and
	// GOMEMLIMIT still caps the heap. Unset means 64; 0 turns it off.
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
