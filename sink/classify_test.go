package sink

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		date string // the answer's Date header
		want time.Duration
	}{
		{"", "", 0},
		{"0", "", 0},
		{"5", "", 5 * time.Second},
		{" 120 ", "", 2 * time.Minute},
		{"-5", "", 0},
		{"1.5", "", 0},
		{"soon", "", 0},
		{"99999999999999999999999", "", time.Duration(math.MaxInt64)},
		{"9223372036854775807", "", time.Duration(math.MaxInt64)},
		{"Sat, 21 Nov 2026 10:01:00 GMT", "", time.Minute},         // IMF-fixdate
		{"Saturday, 21-Nov-26 10:00:10 GMT", "", 10 * time.Second}, // RFC 850
		{"Sat Nov 21 10:00:03 2026", "", 3 * time.Second},          // ANSI C asctime
		{"Sat, 21 Nov 2026 09:59:00 GMT", "", 0},                   // past
		{"2026-11-21T10:01:00Z", "", 0},                            // not an HTTP-date
		// A date is read against the answer's Date, the provider's clock,
		// whatever this replica's clock says.
		{"Sat, 21 Nov 2026 10:01:00 GMT", "Sat, 21 Nov 2026 10:00:30 GMT", 30 * time.Second}, // replica ahead
		{"Sat, 21 Nov 2026 09:59:50 GMT", "Sat, 21 Nov 2026 09:59:00 GMT", 50 * time.Second}, // replica behind
		{"Sat, 21 Nov 2026 10:01:00 GMT", "Sat, 21 Nov 2026 10:02:00 GMT", 0},                // past on the provider's clock
		{"Sat, 21 Nov 2026 10:01:00 GMT", "garbage", time.Minute},                            // unreadable Date: now
		{"120", "Sat, 21 Nov 2026 09:00:00 GMT", 2 * time.Minute},                            // seconds ignore Date
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, tt.date, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q, Date %q): got %s, want %s", tt.in, tt.date, got, tt.want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	tests := []struct {
		in        string
		want      string
		truncated bool
	}{
		{"", "", false},
		{"  {\"error\":\"x\"}\n", `{"error":"x"}`, false},
		{"a\tb\r\nc\x00d", "a b  c d", false},
		{"bad\xffutf8", "badutf8", false},
		{strings.Repeat("x", 512), strings.Repeat("x", 512), false},
		{strings.Repeat("x", 513), strings.Repeat("x", 512), true},
		{strings.Repeat("x", 511) + "é", strings.Repeat("x", 511), true}, // é cut in half is dropped
	}
	for _, tt := range tests {
		got, truncated := excerpt(strings.NewReader(tt.in))
		if got != tt.want || truncated != tt.truncated {
			t.Errorf("excerpt(%.20q…): got (%.20q… len %d, %v), want (%.20q… len %d, %v)",
				tt.in, got, len(got), truncated, tt.want, len(tt.want), tt.truncated)
		}
	}
}
