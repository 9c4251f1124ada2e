package fakeprovider

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fillUntil429 sends 1,000-token jobs, advancing the clock by step before
// each, until one is refused, and returns that refusal.
func fillUntil429(t *testing.T, p *Provider, clk *fakeClock, style Style, step time.Duration) http.Header {
	t.Helper()
	for i := range 100 {
		clk.Advance(step)
		w := job(p, style, 1000)
		if w.Code == http.StatusTooManyRequests {
			return w.Result().Header
		}
		if w.Code != http.StatusOK {
			t.Fatalf("job %d = %d %s, want 200 or 429", i, w.Code, w.Body)
		}
	}
	t.Fatalf("no 429 after 100 jobs")
	return nil
}

func TestRetryAfterMsIsExactTimeUntilFit(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		step time.Duration
	}{
		{TokenBucket, 0},
		{TokenBucket, 137 * time.Millisecond},
		{TokenBucket, 333*time.Millisecond + 7}, // a wait that is not whole ms
		{SlidingWindow, 0},
		{SlidingWindow, 137 * time.Millisecond},
	} {
		t.Run(tc.mode.String()+"/"+tc.step.String(), func(t *testing.T) {
			clk := newClock()
			p := newTestProvider(t, Config{TokenLimit: 10_000, Window: 5 * time.Second, Mode: tc.mode}, clk)
			h := fillUntil429(t, p, clk, OpenAI, tc.step)
			ms := time.Duration(headerInt(t, h, "retry-after-ms")) * time.Millisecond
			if got, want := headerInt(t, h, "retry-after"), int64((ms+time.Second-1)/time.Second); got != want {
				t.Errorf("retry-after = %d, want %d (retry-after-ms %v rounded up)", got, want, ms)
			}
			clk.Advance(ms - time.Millisecond)
			if w := job(p, OpenAI, 1000); w.Code != http.StatusTooManyRequests {
				t.Fatalf("retry 1ms before retry-after-ms (%v) = %d, want 429", ms, w.Code)
			}
			clk.Advance(time.Millisecond)
			if w := job(p, OpenAI, 1000); w.Code != http.StatusOK {
				t.Fatalf("retry after retry-after-ms (%v) = %d %s, want 200", ms, w.Code, w.Body)
			}
		})
	}
}

func TestAnthropicRetryAfterSeconds(t *testing.T) {
	clk := newClock()
	p := newTestProvider(t, Config{TokenLimit: 10_000, Window: 5 * time.Second, Style: Anthropic}, clk)
	h := fillUntil429(t, p, clk, Anthropic, 0)
	if h.Get("retry-after-ms") != "" {
		t.Errorf("Anthropic 429 has retry-after-ms %q, want none", h.Get("retry-after-ms"))
	}
	// An empty bucket needs 1,000 tokens at 2,000/s: 0.5s, rounded up.
	if got := headerInt(t, h, "retry-after"); got != 1 {
		t.Fatalf("retry-after = %d, want 1", got)
	}
	clk.Advance(time.Second)
	if w := job(p, Anthropic, 1000); w.Code != http.StatusOK {
		t.Errorf("retry after retry-after = %d %s, want 200", w.Code, w.Body)
	}
}

func TestRateLimitBodies(t *testing.T) {
	const (
		links = " Visit https://platform.openai.com/account/rate-limits to learn more."
		anthr = "This request would exceed your organization's rate limit of "
	)
	for _, tc := range []struct {
		name  string
		style Style
		cfg   Config
		calls int   // 1,000-token calls admitted before the one checked
		max   int64 // max_tokens of the call checked
		want  map[string]any
		retry string // want retry-after; "" for none
	}{
		{"openai tokens", OpenAI, Config{TokenLimit: 10_000, Window: 5 * time.Second, Mode: SlidingWindow}, 10, 1000,
			map[string]any{"error": map[string]any{"type": "tokens", "param": nil, "code": "rate_limit_exceeded",
				"message": "Rate limit reached for gpt-4o in organization org-fakeprovider on tokens per 5s: " +
					"Limit 10000, Used 10000, Requested 1000. Please try again in 5s." + links}}, "5"},
		{"openai requests", OpenAI, Config{RequestLimit: 2}, 2, 1000,
			map[string]any{"error": map[string]any{"type": "requests", "param": nil, "code": "rate_limit_exceeded",
				"message": "Rate limit reached for gpt-4o in organization org-fakeprovider on requests per min (RPM): " +
					"Limit 2, Used 2, Requested 1. Please try again in 30s." + links}}, "30"},
		{"openai too large", OpenAI, Config{TokenLimit: 10_000}, 0, 12_000,
			map[string]any{"error": map[string]any{"type": "tokens", "param": nil, "code": "rate_limit_exceeded",
				"message": "Request too large for gpt-4o in organization org-fakeprovider on tokens per min (TPM): " +
					"Limit 10000, Requested 12000. The input or output tokens must be reduced in order to run successfully." + links}}, ""},
		{"anthropic tokens", Anthropic, Config{TokenLimit: 10_000, Window: 5 * time.Second, Mode: SlidingWindow}, 10, 1000,
			map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error",
				"message": anthr + "10000 tokens per 5s. Please try again in 5s, or reduce the prompt length or max_tokens."}}, "5"},
		{"anthropic too large", Anthropic, Config{TokenLimit: 10_000}, 0, 12_000,
			map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error",
				"message": "This request asks for 12000 tokens, more than your organization's rate limit of " +
					"10000 tokens per minute allows at once. Reduce the prompt length or max_tokens."}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Style = tc.style
			p := newTestProvider(t, tc.cfg, newClock())
			for i := range tc.calls {
				if w := job(p, tc.style, 1000); w.Code != http.StatusOK {
					t.Fatalf("call %d = %d %s, want 200", i, w.Code, w.Body)
				}
			}
			// A streaming request is refused with JSON too, as real APIs do.
			w := post(p, tc.style, chatBody(tc.style, tc.max, true), PromptTokensHeader, "0")
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("POST = %d %s, want 429", w.Code, w.Body)
			}
			if diff := cmp.Diff(tc.want, decodeMap(t, w.Body.Bytes())); diff != "" {
				t.Errorf("429 body mismatch (-want +got):\n%s", diff)
			}
			if got := w.Result().Header.Get("retry-after"); got != tc.retry {
				t.Errorf("retry-after = %q, want %q", got, tc.retry)
			}
		})
	}
}

func TestTokenRefusalKeepsRequestSlot(t *testing.T) {
	p := newTestProvider(t, Config{TokenLimit: 1000, RequestLimit: 2, Mode: SlidingWindow}, newClock())
	for _, tc := range []struct {
		max  int64
		want int
	}{{900, http.StatusOK}, {200, http.StatusTooManyRequests}, {50, http.StatusOK}, {1, http.StatusTooManyRequests}} {
		w := job(p, OpenAI, tc.max)
		if w.Code != tc.want {
			t.Fatalf("job(%d) = %d %s, want %d", tc.max, w.Code, w.Body, tc.want)
		}
		if tc.max == 1 {
			if got := decodeMap(t, w.Body.Bytes())["error"].(map[string]any)["type"]; got != "requests" {
				t.Errorf("last refusal type = %v, want requests", got)
			}
		}
	}
}
