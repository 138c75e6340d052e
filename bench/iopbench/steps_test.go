//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/bench/mockup"
)

// A step that would need more descriptors than RLIMIT_NOFILE in a one-hop
// proxy (two sockets per stream) is not run: it would measure refused
// connections and report them as the proxy's ceiling.
func TestStepBeyondDescriptorsNotRun(t *testing.T) {
	mock := startMock(t)
	h := &harness{env: &envInfo{Nofile: 500}}
	p := plan{steps: []int{300}, stepHold: 100 * time.Millisecond, rampRate: 1000, stepTries: 1}
	tg := target{name: "nginx", url: mock.URL, streamModel: mockup.Model}
	r := stepRun(context.Background(), h, tg, p)
	if r.Unmeasured != 300 || r.FailedAt != 0 || len(r.Points) != 0 || len(r.Tried) != 0 {
		t.Fatalf("unmeasured %d, failed at %d, %d attempts (%q); want 300 not run", r.Unmeasured, r.FailedAt, len(r.Points), r.Tried)
	}
	res := &results{Env: h.env, Paths: []string{"nginx"}, Steps: []stepResult{r}}
	if md := res.markdown(); !strings.Contains(md, "300 not measurable") || !strings.Contains(md, "RLIMIT_NOFILE is 500") {
		t.Fatalf("the report does not say why step 300 was not run:\n%s", md)
	}
	// One socket per stream: the same step fits.
	if need := descriptors("tunnel", 300); need > h.env.Nofile {
		t.Fatalf("tunnel: %d descriptors for 300 streams", need)
	}
}
