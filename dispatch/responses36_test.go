package dispatch

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The memory of which provider answered which response is bounded: ids
// longer than MaxResponseIDBytes are not remembered, at most
// MaxRememberedResponses are kept (the oldest forgotten first), and each
// is forgotten RememberedResponseTTL after it was recorded.
func TestRememberedResponsesBounded36(t *testing.T) {
	d := New(buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), Options{Bus: dropBus{}, Metrics: NewMetrics(prometheus.NewRegistry())})
	defer d.Close()
	now := time.Unix(1_700_000_000, 0)
	d.responses.now = func() time.Time { return now }
	l := &Lease{res: &resource{key: resKey{"n", "p"}}}

	long := "resp_" + strings.Repeat("x", MaxResponseIDBytes-4)
	d.RememberResponse(long, l)
	d.RememberResponse(long[:MaxResponseIDBytes], l)
	d.RememberResponse("", l)
	d.mu.Lock()
	if _, ok := d.responses.get(long); ok {
		t.Error("an id over the bound was remembered")
	}
	if _, ok := d.responses.get(long[:MaxResponseIDBytes]); !ok {
		t.Error("an id of the bound's length was not remembered")
	}
	if n := len(d.responses.m); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
	d.mu.Unlock()

	for i := range MaxRememberedResponses + 5 {
		d.RememberResponse("resp_"+strconv.Itoa(i), l)
	}
	d.mu.Lock()
	if n := len(d.responses.m); n != MaxRememberedResponses || d.responses.order.Len() != n {
		t.Errorf("%d entries (%d in order), want %d", n, d.responses.order.Len(), MaxRememberedResponses)
	}
	if _, ok := d.responses.get("resp_4"); ok {
		t.Error("an oldest entry outlived the count bound")
	}
	if k, ok := d.responses.get("resp_5"); !ok || k != l.res.key {
		t.Error("the oldest entry kept is gone")
	}
	now = now.Add(RememberedResponseTTL - time.Second)
	if _, ok := d.responses.get("resp_6"); !ok {
		t.Error("an entry was forgotten before its TTL")
	}
	now = now.Add(time.Second)
	if _, ok := d.responses.get("resp_6"); ok {
		t.Error("an entry outlived its TTL")
	}
	if n := len(d.responses.m); n != MaxRememberedResponses-1 {
		t.Errorf("an expired entry was not dropped when looked up: %d entries", n)
	}
	d.mu.Unlock()
}
