package classify

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		wantOK bool
	}{
		{"absent", hdr(), 0, false},
		{"seconds", hdr("Retry-After", "6"), 6 * time.Second, true},
		{"zero means now", hdr("Retry-After", "0"), 0, true},
		{"fractional seconds", hdr("Retry-After", "1.5"), 1500 * time.Millisecond, true},
		{"milliseconds", hdr("Retry-After-Ms", "250"), 250 * time.Millisecond, true},
		{"fractional milliseconds", hdr("Retry-After-Ms", "0.5"), 500 * time.Microsecond, true},
		{"azure x-ms", hdr("X-Ms-Retry-After-Ms", "6000"), 6 * time.Second, true},
		{"longest of three", hdr("Retry-After", "5", "Retry-After-Ms", "4500", "X-Ms-Retry-After-Ms", "6000"), 6 * time.Second, true},
		{"invalid ignored, valid kept", hdr("Retry-After", "soon", "Retry-After-Ms", "100"), 100 * time.Millisecond, true},
		{"comma-joined by a proxy", hdr("Retry-After", "3, 7"), 7 * time.Second, true},
		{"repeated header", hdr("Retry-After", "3", "Retry-After", "9"), 9 * time.Second, true},
		{"negative", hdr("Retry-After", "-2"), 0, false},
		{"NaN", hdr("Retry-After", "NaN"), 0, false},
		{"Inf", hdr("Retry-After-Ms", "+Inf"), 0, false},
		{"hex float", hdr("Retry-After", "0x10p0"), 0, false},
		{"exponent", hdr("Retry-After", "1e3"), 0, false},
		{"huge clamped", hdr("Retry-After", "99999999999"), MaxRetryAfter, true},
		{"huge ms clamped", hdr("Retry-After-Ms", "999999999999999999999999"), MaxRetryAfter, true},
		{"http date", hdr("Retry-After", "Sun, 01 Jun 2025 12:01:00 GMT"), time.Minute, true},
		{"http date in the past", hdr("Retry-After", "Sun, 01 Jun 2025 11:00:00 GMT"), 0, true},
		{"http date against Date header", hdr("Date", "Sun, 01 Jun 2025 11:59:00 GMT", "Retry-After", "Sun, 01 Jun 2025 12:00:00 GMT"), time.Minute, true},
		{"garbled Date header falls back to now", hdr("Date", "yesterday", "Retry-After", "Sun, 01 Jun 2025 12:00:10 GMT"), 10 * time.Second, true},
		{"far future date clamped", hdr("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"), MaxRetryAfter, true},
		{"empty value", hdr("Retry-After", ""), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.header, testNow)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParseGoDuration(t *testing.T) {
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"6m0s", 6 * time.Minute, true},
		{"1s", time.Second, true},
		{"20ms", 20 * time.Millisecond, true},
		{"7.66s", 7660 * time.Millisecond, true},
		{"1h30m", 90 * time.Minute, true},
		{"0.5s", 500 * time.Millisecond, true},
		{"1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"60", time.Minute, true}, // Azure: bare seconds
		{"1d2h", 24 * time.Hour, true},
		{"2d", 24 * time.Hour, true},
		{"0s", 0, true},
		{"-1s", 0, false},
		{"+1s", 0, false},
		{"1x", 0, false},
		{"d", 0, false},
		{"", 0, false},
		{"100000h", MaxRetryAfter, true},
		{"9999999999h", 0, false}, // beyond time.Duration: garbage, not a long wait
		{"65535d", MaxRetryAfter, true},
	}
	for _, tt := range tests {
		got, ok := parseGoDuration(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseGoDuration(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseProtoDuration(t *testing.T) {
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"37s", 37 * time.Second, true},
		{"0.5s", 500 * time.Millisecond, true},
		{"48.805646254s", 48805646254 * time.Nanosecond, true},
		{"37", 0, false},
		{"-1s", 0, false},
		{"s", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseProtoDuration(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseProtoDuration(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}
