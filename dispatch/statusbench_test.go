package dispatch

import (
	"fmt"
	"testing"
)

// statusBenchDispatcher is a dispatcher with 100 ready nodes of 8
// providers each, all candidates of one model (closed at cleanup).
func statusBenchDispatcher(b *testing.B) *Dispatcher {
	var nodes []tNode
	var ids, cands []string
	for i := range 100 {
		n := tNode{id: fmt.Sprintf("n%d", i)}
		for j := range 8 {
			n.provs = append(n.provs, tProv{name: fmt.Sprintf("p%d", j), cap: 4})
			cands = append(cands, fmt.Sprintf("n%d/p%d", i, j))
		}
		nodes = append(nodes, n)
		ids = append(ids, n.id)
	}
	d := benchDispatcher(b, buildCfg(b, nodes, []tModel{{name: "m", cands: cands}}), ids...)
	b.Cleanup(d.Close)
	return d
}

// BenchmarkStatus: one status snapshot (a scrape, /admin/status) of 100
// ready nodes with 8 providers each.
func BenchmarkStatus(b *testing.B) {
	d := statusBenchDispatcher(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if st := d.Status(); len(st.Nodes) != 100 {
			b.Fatalf("nodes: %d", len(st.Nodes))
		}
	}
}

// BenchmarkStatusLockHeld: the part of BenchmarkStatus's snapshot taken
// with the dispatcher's lock held.
func BenchmarkStatusLockHeld(b *testing.B) {
	d := statusBenchDispatcher(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d.mu.Lock()
		st, _ := d.snapshotLocked()
		d.mu.Unlock()
		if len(st.Nodes) != 100 {
			b.Fatalf("nodes: %d", len(st.Nodes))
		}
	}
}
