package classify

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseHeaders(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   RateLimits
	}{
		{
			name: "openai",
			header: hdr(
				"X-Ratelimit-Limit-Requests", "5000", "X-Ratelimit-Remaining-Requests", "4999", "X-Ratelimit-Reset-Requests", "12ms",
				"X-Ratelimit-Limit-Tokens", "160000", "X-Ratelimit-Remaining-Tokens", "159976", "X-Ratelimit-Reset-Tokens", "1h2m3.5s"),
			want: RateLimits{
				Requests: Window{Limit: 5000, Remaining: 4999, Reset: 12 * time.Millisecond, HasLimit: true, HasRemaining: true, HasReset: true},
				Tokens:   Window{Limit: 160000, Remaining: 159976, Reset: time.Hour + 2*time.Minute + 3500*time.Millisecond, HasLimit: true, HasRemaining: true, HasReset: true},
			},
		},
		{
			name: "anthropic RFC 3339 resets",
			header: hdr(
				"Anthropic-Ratelimit-Requests-Limit", "50", "Anthropic-Ratelimit-Requests-Remaining", "49", "Anthropic-Ratelimit-Requests-Reset", "2025-06-01T12:00:01Z",
				"Anthropic-Ratelimit-Tokens-Limit", "90000", "Anthropic-Ratelimit-Tokens-Remaining", "0", "Anthropic-Ratelimit-Tokens-Reset", "2025-06-01T12:00:30.250Z",
				"Anthropic-Ratelimit-Input-Tokens-Limit", "50000", "Anthropic-Ratelimit-Input-Tokens-Remaining", "0", "Anthropic-Ratelimit-Input-Tokens-Reset", "2025-06-01T14:00:00+02:00",
				"Anthropic-Ratelimit-Output-Tokens-Limit", "10000", "Anthropic-Ratelimit-Output-Tokens-Remaining", "10000", "Anthropic-Ratelimit-Output-Tokens-Reset", "2025-06-01T11:59:00Z"),
			want: RateLimits{
				Requests:     Window{Limit: 50, Remaining: 49, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true},
				Tokens:       Window{Limit: 90000, Remaining: 0, Reset: 30250 * time.Millisecond, HasLimit: true, HasRemaining: true, HasReset: true},
				InputTokens:  Window{Limit: 50000, Remaining: 0, Reset: 0, HasLimit: true, HasRemaining: true, HasReset: true},
				OutputTokens: Window{Limit: 10000, Remaining: 10000, Reset: 0, HasLimit: true, HasRemaining: true, HasReset: true},
			},
		},
		{
			name: "azure sends -1 and bare seconds",
			header: hdr("X-Ratelimit-Limit-Tokens", "-1", "X-Ratelimit-Remaining-Tokens", "-1", "X-Ratelimit-Reset-Tokens", "0",
				"X-Ratelimit-Remaining-Requests", "12", "X-Ratelimit-Reset-Requests", "60"),
			want: RateLimits{
				Requests: Window{Remaining: 12, Reset: time.Minute, HasRemaining: true, HasReset: true},
				Tokens:   Window{Reset: 0, HasReset: true},
			},
		},
		{
			name: "garbage leaves fields unknown",
			header: hdr("X-Ratelimit-Limit-Requests", "lots", "X-Ratelimit-Remaining-Requests", "NaN", "X-Ratelimit-Reset-Requests", "soon",
				"Anthropic-Ratelimit-Tokens-Reset", "2025-13-45T99:00:00Z", "X-Ratelimit-Limit-Tokens", "1e400"),
			want: RateLimits{},
		},
		{
			name:   "proxy re-encoded float counts",
			header: hdr("X-Ratelimit-Limit-Tokens", "1000.0", "X-Ratelimit-Remaining-Tokens", "999.9"),
			want:   RateLimits{Tokens: Window{Limit: 1000, Remaining: 999, HasLimit: true, HasRemaining: true}},
		},
		{
			name:   "none",
			header: nil,
			want:   RateLimits{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseHeaders(tt.header, testNow)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseHeaders(%v) mismatch (-want +got):\n%s", tt.header, diff)
			}
		})
	}
}

func TestExhaustedWindow(t *testing.T) {
	tests := []struct {
		name      string
		rl        RateLimits
		wantLimit Limit
		wantReset time.Duration
		wantOK    bool
	}{
		{"none exhausted", RateLimits{Tokens: Window{Remaining: 5, HasRemaining: true}}, LimitUnknown, 0, false},
		{"one exhausted", RateLimits{Requests: Window{Remaining: 0, HasRemaining: true, Reset: time.Second, HasReset: true}}, LimitRequests, time.Second, true},
		{
			"the one refilling last binds",
			RateLimits{
				Tokens:   Window{HasRemaining: true, Reset: 2 * time.Second, HasReset: true},
				Requests: Window{HasRemaining: true, Reset: 9 * time.Second, HasReset: true},
			},
			LimitRequests, 9 * time.Second, true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, reset, _, ok := tt.rl.exhaustedWindow()
			if l != tt.wantLimit || reset != tt.wantReset || ok != tt.wantOK {
				t.Errorf("exhaustedWindow() = %v, %v, %v; want %v, %v, %v", l, reset, ok, tt.wantLimit, tt.wantReset, tt.wantOK)
			}
		})
	}
}
