package classify

import (
	"net/http"
	"testing"
	"time"
)

// ParseHeaders runs on every answer before the caller sees its first byte:
// it must not build or canonicalize header names per call.
func TestParseHeadersAllocs(t *testing.T) {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "500")
	h.Set("x-ratelimit-remaining-requests", "499")
	h.Set("x-ratelimit-reset-requests", "120ms")
	h.Set("x-ratelimit-limit-tokens", "200000")
	h.Set("x-ratelimit-remaining-tokens", "199000")
	h.Set("x-ratelimit-reset-tokens", "6m0s")
	now := time.Now()
	got := testing.AllocsPerRun(100, func() { _ = ParseHeaders(h, now) })
	if got > 0 {
		t.Fatalf("ParseHeaders allocates %v times per call on OpenAI's headers; want 0", got)
	}
	if rl := ParseHeaders(h, now); rl.Tokens.Remaining != 199000 || rl.Requests.Reset != 120*time.Millisecond {
		t.Fatalf("ParseHeaders = %+v", rl)
	}
}
