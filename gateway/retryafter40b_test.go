package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzRetryAfter40b: the Messages surface passes on an upstream's
// Retry-After (hostile or broken: any bytes a header value holds), so
// whatever it is, what a client is told is nothing, delta-seconds of at
// most maxRetryAfterSec without leading zeros (the value itself, clamped),
// or the value itself when it is an HTTP-date at most maxRetryAfterSec
// ahead.
func FuzzRetryAfter40b(f *testing.F) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"", "0", "120", "007", "3601", "99999999999999999999999", "-5", "1.5", " 5", "5 ",
		"Mon, 07 Dec 2026 12:30:00 GMT", "Monday, 07-Dec-26 14:00:00 GMT", "Mon Dec  7 11:00:00 2026", "Mon, 07 Dec 2026 12:30:00 UTC", "soon"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		out := retryAfter(v, now)
		if out == "" {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && strings.Trim(v, "0123456789") == "" {
				t.Fatalf("delta-seconds %q (%d) dropped", v, n)
			}
			if d, err := http.ParseTime(v); err == nil {
				t.Fatalf("date %q (%v) dropped", v, d)
			}
			return
		}
		if n, err := strconv.Atoi(out); err == nil && strconv.Itoa(n) == out {
			if n < 0 || n > maxRetryAfterSec {
				t.Fatalf("%q became %d seconds", v, n)
			}
			if want, err := strconv.ParseUint(v, 10, 64); err == nil && strings.Trim(v, "0123456789") == "" && uint64(n) != min(want, maxRetryAfterSec) {
				t.Fatalf("%q became %d seconds", v, n)
			}
			return
		}
		d, err := http.ParseTime(out)
		if err != nil || out != v || d.Sub(now) > maxRetryAfterSec*time.Second {
			t.Fatalf("%q became %q (%v, %v)", v, out, d, err)
		}
	})
}
