package healthname

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Every value of the proto enum, read from its descriptor, has a name of
// its own here: a value added to runtime.proto without one fails this
// (it would render as "ok" on both surfaces, hiding the new state).
func TestEveryEnumValueHasAName(t *testing.T) {
	values := iop.HealthState(0).Descriptor().Values()
	if values.Len() < 5 {
		t.Fatalf("descriptor lists %d values", values.Len())
	}
	seen := map[string]iop.HealthState{}
	for i := 0; i < values.Len(); i++ {
		h := iop.HealthState(values.Get(i).Number())
		name, ok := names[h]
		if !ok || name == "" {
			t.Errorf("%s has no name", values.Get(i).Name())
			continue
		}
		if Of(h) != name {
			t.Errorf("Of(%s) = %q, want %q", h, Of(h), name)
		}
		// Unspecified shares ok's name (an unprobed backend is dispatched
		// to); any other two values sharing one would read back wrong.
		if prev, dup := seen[name]; dup && h != iop.HealthState_HEALTH_STATE_UNSPECIFIED && prev != iop.HealthState_HEALTH_STATE_UNSPECIFIED {
			t.Errorf("%s and %s share the name %q", prev, h, name)
		}
		seen[name] = h
		if h != iop.HealthState_HEALTH_STATE_UNSPECIFIED && Parse(name) != h {
			t.Errorf("Parse(%q) = %s, want %s", name, Parse(name), h)
		}
	}
	if len(names) != values.Len() {
		t.Errorf("names has %d entries, the enum %d values: a name for no value", len(names), values.Len())
	}
}

// A value this build does not know (a newer peer's) renders as "ok", as
// documented on Of; an unknown name parses as unspecified; "ok" as OK.
func TestUnknownValuesAndNames(t *testing.T) {
	if got := Of(iop.HealthState(1 << 20)); got != "ok" {
		t.Errorf("Of(unknown) = %q, want ok", got)
	}
	if got := Of(iop.HealthState_HEALTH_STATE_UNSPECIFIED); got != "ok" {
		t.Errorf("Of(unspecified) = %q, want ok", got)
	}
	if got := Parse("no-such-state"); got != iop.HealthState_HEALTH_STATE_UNSPECIFIED {
		t.Errorf("Parse(unknown) = %s, want unspecified", got)
	}
	if got := Parse("ok"); got != iop.HealthState_HEALTH_STATE_OK {
		t.Errorf("Parse(ok) = %s, want OK", got)
	}
}
