package fakeprovider

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// With Refund the unused part of max_tokens goes back when the call ends,
// and the answer's headers already show it; without it the charge stays.
func TestRefund(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           Config
		stream        bool
		remaining     int64 // after one call of max_tokens 1,000 that uses 100
		header        string
		refunded, fit int64 // Stats.TokensRefunded after it; calls that fit in all
	}{
		{"openai, no refund", Config{}, false, 9000, "x-ratelimit-remaining-tokens", 0, 10},
		{"openai, refund", Config{Refund: true}, false, 9900, "x-ratelimit-remaining-tokens", 900, 91},
		{"openai stream, refund", Config{Refund: true}, true, 9900, "x-ratelimit-remaining-tokens", 900, 91},
		{"anthropic, refund", Config{Refund: true, Style: Anthropic}, false, 9900, "anthropic-ratelimit-tokens-remaining", 900, 91},
		{"sliding, refund", Config{Refund: true, Mode: SlidingWindow}, false, 9900, "x-ratelimit-remaining-tokens", 900, 91},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.TokenLimit, cfg.Window = 10_000, 5*time.Second
			p := newTestProvider(t, cfg, newClock()) // the clock stands still: nothing refills
			call := func() *httptest.ResponseRecorder {
				return post(p, cfg.Style, chatBody(cfg.Style, 1000, tc.stream), PromptTokensHeader, "0", OutputTokensHeader, "100")
			}
			w := call()
			if w.Code != http.StatusOK {
				t.Fatalf("first call = %d %s, want 200", w.Code, w.Body)
			}
			if got := headerInt(t, w.Result().Header, tc.header); got != tc.remaining {
				t.Errorf("%s = %d, want %d", tc.header, got, tc.remaining)
			}
			s := p.Stats()
			if s.TokensAdmitted != 1000 || s.TokensUsed != 100 || s.TokensRefunded != tc.refunded {
				t.Errorf("Stats() admitted %d, used %d, refunded %d; want 1000, 100, %d", s.TokensAdmitted, s.TokensUsed, s.TokensRefunded, tc.refunded)
			}
			// Each call needs 1,000 free to get in and keeps 100 with
			// refunds: 90 more fit before fewer than 1,000 are left.
			n := int64(1)
			for ; n < 200; n++ {
				if w := call(); w.Code != http.StatusOK {
					break
				}
			}
			if n != tc.fit {
				t.Errorf("%d calls fit, want %d", n, tc.fit)
			}
		})
	}
}

// A refund never lifts the bucket above its capacity: the refill has
// already restored what the call did not use.
func TestRefundCappedAtCapacity(t *testing.T) {
	clk := newClock()
	p := newTestProvider(t, Config{TokenLimit: 10_000, Window: 5 * time.Second, Refund: true,
		LatencyFunc: func(Usage) time.Duration { clk.Advance(5 * time.Second); return 0 }}, clk)
	w := post(p, OpenAI, chatBody(OpenAI, 1000, false), PromptTokensHeader, "0", OutputTokensHeader, "0")
	if got := headerInt(t, w.Result().Header, "x-ratelimit-remaining-tokens"); got != 10_000 {
		t.Errorf("remaining after a call that took a whole window = %d, want 10000 (the capacity)", got)
	}
	if s := p.Stats(); s.TokensRefunded != 1000 {
		t.Errorf("TokensRefunded = %d, want 1000 (counted even when the bucket was full)", s.TokensRefunded)
	}
}

// A client that gives up before the answer gets no refund: the provider
// never learned how much of max_tokens it would have used.
func TestRefundNotForAbandonedCall(t *testing.T) {
	p := newTestProvider(t, Config{TokenLimit: 10_000, Refund: true,
		LatencyFunc: func(Usage) time.Duration { return time.Hour }}, newClock())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, openAIPath, strings.NewReader(chatBody(OpenAI, 1000, false)))
	r.Header.Set(PromptTokensHeader, "0")
	r.Header.Set(OutputTokensHeader, "10")
	p.ServeHTTP(httptest.NewRecorder(), r)
	if s := p.Stats(); s.TokensAdmitted != 1000 || s.TokensRefunded != 0 {
		t.Errorf("Stats() admitted %d, refunded %d; want 1000, 0", s.TokensAdmitted, s.TokensRefunded)
	}
	if got := p.limitsAt(p.cfg.now()).tokens.remaining; got != 9000 {
		t.Errorf("remaining = %d, want 9000", got)
	}
}

// open is an admitted call that has not ended yet, in both the limiter
// under test (ticket) and the reference (ref, an index for refSliding).
type open struct {
	ticket int64
	ref    int
	n      int64
}

// refundStep ends one of the calls still open, at random, giving back a
// random part of its units (none, some or all), and returns the calls
// still open with it, the part, and false if none was open.
func refundStep(rnd *rand.Rand, calls []open) (rest []open, ended open, part int64, ok bool) {
	if len(calls) == 0 {
		return calls, open{}, 0, false
	}
	i := rnd.IntN(len(calls))
	ended = calls[i]
	calls[i] = calls[len(calls)-1]
	return calls[:len(calls)-1], ended, rnd.Int64N(ended.n + 1), true
}

// With refunds the bucket is the reference bucket that gets each ended
// call's unused units back, never above its capacity.
func TestTokenBucketRefundMatchesReference(t *testing.T) {
	for i, tc := range limiterCases {
		t.Run(fmt.Sprintf("%d_per_%v", tc.limit, tc.window), func(t *testing.T) {
			start := time.Unix(1000, 0)
			b := newLimiter(TokenBucket, tc.limit, tc.window, start)
			ref := &refBucket{limit: tc.limit, window: int64(tc.window), level: big.NewRat(tc.limit, 1)}
			rnd := rand.New(rand.NewPCG(uint64(200+i), 3))
			var calls []open
			now, admitted, denied, refunds := int64(0), 0, 0, 0
			for s := range 3000 {
				if rnd.IntN(4) > 0 {
					now += rnd.Int64N(int64(tc.window / 8))
				}
				tnow := start.Add(time.Duration(now))
				ref.refill(now)
				if rnd.IntN(3) == 0 {
					var ended open
					var part int64
					var ok bool
					if calls, ended, part, ok = refundStep(rnd, calls); ok {
						b.refund(tnow, ended.ticket, part)
						ref.level.Add(ref.level, big.NewRat(part, 1))
						if cap := big.NewRat(tc.limit, 1); ref.level.Cmp(cap) > 0 {
							ref.level = cap
						}
						refunds++
					}
				} else {
					n := 1 + rnd.Int64N(tc.limit)
					fits := ref.level.Cmp(big.NewRat(n, 1)) >= 0
					got := b.wait(tnow, n)
					if fits != (got == 0) {
						t.Fatalf("step %d: wait(%d) = %v, reference fits = %v (level %s)", s, n, got, fits, ref.level.FloatString(3))
					}
					if !fits {
						if want := ref.untilHas(n); int64(got) != want {
							t.Fatalf("step %d: wait(%d) = %d ns, want %d ns", s, n, got, want)
						}
						denied++
						continue
					}
					calls = append(calls, open{ticket: b.take(tnow, n), n: n})
					ref.level.Sub(ref.level, big.NewRat(n, 1))
					admitted++
				}
				if got, want := b.remaining(tnow), new(big.Int).Quo(ref.level.Num(), ref.level.Denom()).Int64(); got != want {
					t.Fatalf("step %d: remaining() = %d, want %d", s, got, want)
				}
				if got, want := int64(b.untilFull(tnow)), ref.untilHas(tc.limit); got != want {
					t.Fatalf("step %d: untilFull() = %d ns, want %d ns", s, got, want)
				}
			}
			if admitted < 10 || denied < 10 || refunds < 10 {
				t.Errorf("%d admissions, %d denials, %d refunds; the schedule does not exercise the bucket", admitted, denied, refunds)
			}
		})
	}
}

// With refunds the window is the reference window in which an ended call's
// admission counts only the units it kept, until it leaves at its time.
func TestSlidingWindowRefundMatchesReference(t *testing.T) {
	for i, tc := range limiterCases {
		t.Run(fmt.Sprintf("%d_per_%v", tc.limit, tc.window), func(t *testing.T) {
			start := time.Unix(1000, 0)
			l := newLimiter(SlidingWindow, tc.limit, tc.window, start)
			ref := &refSliding{limit: tc.limit, window: int64(tc.window)}
			rnd := rand.New(rand.NewPCG(uint64(300+i), 3))
			var calls []open
			now, denied, refunds, late := int64(0), 0, 0, 0
			for s := range 1500 {
				if rnd.IntN(4) > 0 {
					now += rnd.Int64N(int64(tc.window / 8))
				}
				tnow := start.Add(time.Duration(now))
				if rnd.IntN(3) == 0 {
					var ended open
					var part int64
					var ok bool
					if calls, ended, part, ok = refundStep(rnd, calls); ok {
						l.refund(tnow, ended.ticket, part)
						ref.n[ended.ref] -= part
						refunds++
						if now-ref.at[ended.ref] >= ref.window {
							late++ // out of the window already: nothing changes
						}
					}
				} else {
					n := 1 + rnd.Int64N(tc.limit)
					want := ref.firstFit(now, n) - now
					if got := l.wait(tnow, n); int64(got) != want {
						t.Fatalf("step %d: wait(%d) = %d ns, want %d ns", s, n, got, want)
					}
					if want > 0 {
						denied++
						continue
					}
					calls = append(calls, open{ticket: l.take(tnow, n), ref: len(ref.at), n: n})
					ref.at, ref.n = append(ref.at, now), append(ref.n, n)
				}
				if got, want := l.remaining(tnow), tc.limit-ref.sumAt(now); got != want {
					t.Fatalf("step %d: remaining() = %d, want %d", s, got, want)
				}
				if got, want := l.untilFull(tnow), ref.untilEmpty(now); int64(got) != want {
					t.Fatalf("step %d: untilFull() = %d ns, want %d ns", s, got, want)
				}
			}
			if len(ref.at) < 10 || denied < 10 || refunds < 10 || late < 1 {
				t.Errorf("%d admissions, %d denials, %d refunds (%d after the window); the schedule does not exercise the window",
					len(ref.at), denied, refunds, late)
			}
		})
	}
}

// untilEmpty is how long until every admission has left the window.
func (r *refSliding) untilEmpty(now int64) int64 {
	var last int64
	for _, a := range r.at {
		if now-a < r.window {
			last = max(last, a+r.window-now)
		}
	}
	return last
}
