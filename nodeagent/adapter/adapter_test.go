package adapter

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"  ", 0},
		{"soon", 0},
		{"1.5", 0},
		{"0", MinRetryAfterSec},
		{"-3", 0}, // delay-seconds is digits only (RFC 9110)
		{"+5", 0},
		{"-0", 0},
		{"0x10", 0},
		{"1", 1},
		{" 20 ", 20},
		{"3600", 3600},
		{"3601", MaxRetryAfterSec},
		{"99999999999999999999999", MaxRetryAfterSec},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30},
		{now.Add(1500 * time.Millisecond).Format(http.TimeFormat), 1}, // second resolution: 12:00:01
		{now.Add(-time.Hour).Format(http.TimeFormat), MinRetryAfterSec},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), MaxRetryAfterSec},
		{"Saturday, 01-Mar-25 12:00:10 GMT", 10}, // RFC 850
		{"Sat Mar  1 12:00:10 2025", 10},         // asctime
	}
	for _, tc := range cases {
		if got := ParseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
