package fakeprovider

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOpenAIDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{time.Nanosecond, "1ms"}, // rounded up: waiting the printed time is enough
		{20 * time.Millisecond, "20ms"},
		{999*time.Millisecond + 1, "1s"},
		{time.Second, "1s"},
		{8640 * time.Millisecond, "8.64s"},
		{6 * time.Minute, "6m0s"},
		{2*time.Minute + 59560*time.Millisecond, "2m59.56s"},
		{time.Hour, "1h0m0s"},
	} {
		if got := openAIDuration(tc.d); got != tc.want {
			t.Errorf("openAIDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func FuzzOpenAIDuration(f *testing.F) {
	for _, d := range []int64{0, 1, 1e6, 1e9, 6e10, 36e11 + 1} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, ns int64) {
		if ns < 0 || ns > int64(1000*time.Hour) {
			return
		}
		d := time.Duration(ns)
		s := openAIDuration(d)
		back, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("openAIDuration(%v) = %q, which ParseDuration rejects: %v", d, s, err)
		}
		if back < d || back-d >= time.Millisecond {
			t.Fatalf("openAIDuration(%v) = %q, parses to %v; want within [d, d+1ms)", d, s, back)
		}
	})
}

// headerProvider has both limits and has admitted one call charging 16
// tokens, the shape of OpenAI's documented header example.
func headerProvider(t *testing.T, style Style) (*fakeClock, *http.Response) {
	t.Helper()
	clk := newClock()
	p := newTestProvider(t, Config{TokenLimit: 150_000, RequestLimit: 60, Style: style}, clk)
	w := post(p, style, chatBody(style, 6, false), PromptTokensHeader, "10")
	if w.Code != http.StatusOK {
		t.Fatalf("POST = %d %s, want 200", w.Code, w.Body)
	}
	return clk, w.Result()
}

func TestOpenAIRateHeadersParseBack(t *testing.T) {
	_, res := headerProvider(t, OpenAI)
	h := res.Header
	got := map[string]int64{}
	for _, name := range []string{"limit-requests", "limit-tokens", "remaining-requests", "remaining-tokens"} {
		got[name] = headerInt(t, h, "x-ratelimit-"+name)
	}
	want := map[string]int64{"limit-requests": 60, "limit-tokens": 150_000,
		"remaining-requests": 59, "remaining-tokens": 149_984}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("x-ratelimit counts mismatch (-want +got):\n%s", diff)
	}
	// One request refills in 60s/60 = 1s; 16 tokens at 2,500/s take 6.4ms,
	// printed rounded up.
	for name, want := range map[string]time.Duration{"requests": time.Second, "tokens": 7 * time.Millisecond} {
		s := h.Get("x-ratelimit-reset-" + name)
		got, err := time.ParseDuration(s)
		if err != nil || got != want {
			t.Errorf("x-ratelimit-reset-%s = %q (%v, %v), want %v", name, s, got, err, want)
		}
	}
	if h.Get("anthropic-ratelimit-tokens-limit") != "" {
		t.Errorf("OpenAI answer carries anthropic-ratelimit headers: %v", h)
	}
}

func TestAnthropicRateHeadersParseBack(t *testing.T) {
	clk, res := headerProvider(t, Anthropic)
	h := res.Header
	for _, tc := range []struct {
		dim              string
		limit, remaining int64
		reset            time.Time
	}{
		{"requests", 60, 59, clk.Now().Add(time.Second)},
		{"tokens", 150_000, 149_984, clk.Now().Add(time.Second)}, // 6.4ms, rounded up to the second
	} {
		if got := headerInt(t, h, "anthropic-ratelimit-"+tc.dim+"-limit"); got != tc.limit {
			t.Errorf("anthropic-ratelimit-%s-limit = %d, want %d", tc.dim, got, tc.limit)
		}
		if got := headerInt(t, h, "anthropic-ratelimit-"+tc.dim+"-remaining"); got != tc.remaining {
			t.Errorf("anthropic-ratelimit-%s-remaining = %d, want %d", tc.dim, got, tc.remaining)
		}
		s := h.Get("anthropic-ratelimit-" + tc.dim + "-reset")
		got, err := time.Parse(time.RFC3339, s)
		if err != nil || !got.Equal(tc.reset) {
			t.Errorf("anthropic-ratelimit-%s-reset = %q (%v, %v), want %v", tc.dim, s, got, err, tc.reset)
		}
	}
	if h.Get("x-ratelimit-limit-tokens") != "" {
		t.Errorf("Anthropic answer carries x-ratelimit headers: %v", h)
	}
}

func TestRateHeadersOmitUnsetLimit(t *testing.T) {
	p := newTestProvider(t, Config{TokenLimit: 100}, newClock())
	h := job(p, OpenAI, 10).Result().Header
	if got := h.Get("x-ratelimit-remaining-tokens"); got != "90" {
		t.Errorf("x-ratelimit-remaining-tokens = %q, want %q", got, "90")
	}
	if got := h.Get("x-ratelimit-limit-requests"); got != "" {
		t.Errorf("x-ratelimit-limit-requests = %q with no request limit, want it absent", got)
	}
}

func TestSetRetryHeaders(t *testing.T) {
	for _, tc := range []struct {
		style   Style
		d       time.Duration
		want    http.Header
		comment string
	}{
		{OpenAI, 300 * time.Millisecond, http.Header{"Retry-After": {"1"}, "Retry-After-Ms": {"300"}}, "seconds round up"},
		{OpenAI, 2*time.Second + 1, http.Header{"Retry-After": {"3"}, "Retry-After-Ms": {"2001"}}, "ms round up"},
		{Anthropic, 1500 * time.Millisecond, http.Header{"Retry-After": {"2"}}, "no retry-after-ms"},
	} {
		h := http.Header{}
		setRetryHeaders(h, tc.style, tc.d)
		if diff := cmp.Diff(tc.want, h); diff != "" {
			t.Errorf("setRetryHeaders(%v, %v) (%s) mismatch (-want +got):\n%s", tc.style, tc.d, tc.comment, diff)
		}
	}
}
