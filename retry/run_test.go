package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/retry"
)

// Run against a provider that 429s: the shared budget is paused for the
// provider's delay (a second Pacer sees it), Run waits at least that delay,
// retries, and settles the real usage.
func TestRunRateLimitedPausesEveryone(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		// The provider allows 3,000 tokens per 2 s; the pacer believes in a
		// much larger budget (say, another app shares the key), so the second
		// call meets a 429.
		fp, client := startProvider(t, fakeprovider.Config{TokenLimit: 3000, Window: 2 * time.Second})
		clock := runningClock() // Run waits out the pause on Redis's clock
		ps := newPacers(t, b, 2, pacer.Config{Limits: pacer.Limits{TPD: 1_000_000, RPD: 1000}})
		call := func(ctx context.Context) (usage, error) { return client.Chat(ctx, 1000, 500, 1000) }
		total := func(u usage) int64 { return u.Total() }

		if _, err := retry.Run(ctx, ps[0], pacer.Request{Tokens: 2000}, call, total); err != nil {
			t.Fatalf("first Run = %v", err)
		}
		var attempts []retry.Attempt
		start := time.Now()
		u, err := retry.Run(ctx, ps[0], pacer.Request{Tokens: 2000}, call, total,
			retry.WithOnAttempt(func(a retry.Attempt) { attempts = append(attempts, a) }))
		took := time.Since(start)
		if err != nil {
			t.Fatalf("second Run = %v", err)
		}
		if u.Total() != 1500 {
			t.Errorf("usage = %+v; want 1500 tokens", u)
		}
		if len(attempts) != 2 || attempts[0].Verdict.Kind != classify.RateLimited || attempts[1].Err != nil {
			t.Fatalf("attempts = %+v; want a 429 then a success", attempts)
		}
		delay := attempts[0].Verdict.RetryAfter
		if delay <= 0 {
			t.Fatalf("the 429 carried no retry delay: %+v", attempts[0].Verdict)
		}
		if took < delay {
			t.Errorf("Run took %v; want at least the provider's delay %v", took, delay)
		}
		st := fp.Stats()
		if st.Calls != 3 || st.RateLimited != 1 || st.OK != 2 {
			t.Errorf("provider saw %d calls, %d 429s, %d OK; want 3, 1, 2", st.Calls, st.RateLimited, st.OK)
		}
		// Both successes settled 1,500 real tokens; the 429'd attempt kept
		// its 2,000-token reservation: the refusal showed the budget ahead.
		s := snap(t, ps[1])
		clock.Level(t, "TPD (real usage settled, the rate-limited attempt charged)", s.Rate("tpd").Level, 1_000_000-1500-2000-1500, 1_000_000/86_400.0)
		clock.Level(t, "RPD (three requests, the refused one included)", s.Rate("rpd").Level, 1000-3, 1000/86_400.0)
	})
}

// One 429 pauses every process sharing the budget.
func TestRunPauseSeenByAnotherPacer(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		fp, client := startProvider(t, fakeprovider.Config{TokenLimit: 1000, Window: 3 * time.Second})
		ps := newPacers(t, b, 2, pacer.Config{Limits: pacer.Limits{TPM: 1_000_000}})
		call := func(ctx context.Context) (usage, error) { return client.Chat(ctx, 500, 100, 500) }
		// Two calls of 1,000 tokens: the second is over the provider's limit.
		_, _ = retry.Run(ctx, ps[0], pacer.Request{Tokens: 1000}, call, nil, retry.WithRetries(0))
		var delay time.Duration
		asked := time.Now()
		_, err := retry.Run(ctx, ps[0], pacer.Request{Tokens: 1000}, call, nil, retry.WithRetries(0),
			retry.WithOnAttempt(func(a retry.Attempt) { delay = a.Verdict.RetryAfter }))
		if !errors.Is(err, retry.ErrRateLimited) || !errors.Is(err, retry.ErrExhausted) {
			t.Fatalf("Run with no retries left = %v; want ErrRateLimited and ErrExhausted", err)
		}
		if fp.Stats().RateLimited != 1 || delay <= 0 {
			t.Fatalf("provider 429s = %d, the last with a delay of %v; want 1, with a delay", fp.Stats().RateLimited, delay)
		}
		// The pause began after asked, on Redis's clock: what remains of it
		// is at most the provider's delay and at least that less the time
		// since asked.
		s := snap(t, ps[1])
		if least := delay - time.Since(asked) - time.Millisecond; s.Paused > delay || s.Paused < least {
			t.Errorf("second Pacer sees pause %v; want what remains of the provider's delay %v", s.Paused, delay)
		}
		if l, wait, _ := tryAcquire(ps[1], ctx, pacer.Request{Tokens: 10}); l != nil || wait < delay-time.Since(asked)-time.Millisecond {
			t.Errorf("second Pacer's TryAcquire = %v, %v; want held back by the pause", l, wait)
		}
	})
}

// insufficient_quota is never retried: exactly one call.
func TestRunQuotaExhaustedNeverRetried(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		fp, client := startProvider(t, fakeprovider.Config{TokenLimit: 1_000_000, QuotaTokens: 1})
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 100_000}})
		call := func(ctx context.Context) (usage, error) { return client.Chat(ctx, 10, 10, 10) }
		_, _ = retry.Run(ctx, p, pacer.Request{Tokens: 20}, call, nil) // uses up the credit
		fp.ResetStats()
		start := time.Now()
		// A backoff of 10 s or more (5 s after jitter): a Run that slept
		// even one before giving up would take that long.
		_, err := retry.Run(ctx, p, pacer.Request{Tokens: 20}, call, nil, retry.WithRetries(5), retry.WithBackoff(10*time.Second, time.Minute))
		if !errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Fatalf("Run = %v; want ErrQuotaExhausted", err)
		}
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 1 || re.Verdict.Code != "insufficient_quota" {
			t.Errorf("Error = %+v; want 1 attempt, code insufficient_quota", re)
		}
		if n := fp.Stats().Calls; n != 1 {
			t.Errorf("provider saw %d calls; want exactly 1", n)
		}
		if d := time.Since(start); d >= 5*time.Second {
			t.Errorf("Run took %v, as long as a backoff; an exhausted quota must surface at once", d)
		}
		if s := snap(t, p); s.Paused != 0 {
			t.Errorf("an exhausted quota paused the budget for %v; it must not", s.Paused)
		}
	})
}

// Overloaded (529) and 500 are retried with backoff; a 400 is not; retries
// are bounded.
func TestRunRetriesByKind(t *testing.T) {
	for _, tc := range []struct {
		name      string
		style     fakeprovider.Style
		fail      int
		status    int
		retries   int
		wantCalls int64
		wantErr   error
	}{
		{"anthropic 529 then ok", fakeprovider.Anthropic, 2, 529, 3, 3, nil},
		{"openai 500 then ok", fakeprovider.OpenAI, 1, 500, 3, 2, nil},
		{"openai 503 exhausted", fakeprovider.OpenAI, 10, 503, 2, 3, retry.ErrExhausted},
		{"400 permanent", fakeprovider.OpenAI, 1, 400, 3, 1, retry.ErrPermanent},
		{"401 permanent", fakeprovider.Anthropic, 1, 401, 3, 1, retry.ErrPermanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := redistest.Mini(t)
			fp, client := startProvider(t, fakeprovider.Config{TokenLimit: 1_000_000, Style: tc.style})
			if err := fp.Fail(tc.fail, tc.status); err != nil {
				t.Fatal(err)
			}
			p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 100_000}})
			var sleeps []time.Duration
			last := time.Now()
			_, err := retry.Run(context.Background(), p, pacer.Request{Tokens: 100},
				func(ctx context.Context) (usage, error) {
					sleeps = append(sleeps, time.Since(last))
					u, err := client.Chat(ctx, 50, 20, 50)
					last = time.Now()
					return u, err
				}, usage.Total, retry.WithRetries(tc.retries), retry.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
			if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("Run = %v; want %v", err, tc.wantErr)
			}
			if n := fp.Stats().Calls; n != tc.wantCalls {
				t.Errorf("provider saw %d calls; want %d", n, tc.wantCalls)
			}
			for i := 1; i < len(sleeps); i++ {
				if min := 20 * time.Millisecond << (i - 1) / 2; sleeps[i] < min {
					t.Errorf("backoff before attempt %d = %v; want at least %v", i+1, sleeps[i], min)
				}
			}
		})
	}
}

// Run WithNoWait hands a job back, charging nothing, when there is no room.
func TestRunNoWaitNotYet(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		_, client := startProvider(t, fakeprovider.Config{TokenLimit: 1_000_000})
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPD: 1000, RPD: 100}})
		var calls atomic.Int64
		call := func(ctx context.Context) (usage, error) { calls.Add(1); return client.Chat(ctx, 300, 100, 500) }
		if u, err := retry.Run(ctx, p, pacer.Request{Tokens: 800}, call, usage.Total, retry.WithNoWait()); err != nil || u.Total() != 400 {
			t.Fatalf("Run(WithNoWait) = %+v, %v; want 400 tokens used", u, err)
		}
		before := snap(t, p)
		_, err := retry.Run(ctx, p, pacer.Request{Tokens: 800}, call, usage.Total, retry.WithNoWait())
		var ny *pacer.RefusedError
		if !errors.Is(err, pacer.ErrWaitTimeout) || !errors.As(err, &ny) || retryAfter(ny) <= 0 {
			t.Fatalf("Run(WithNoWait) with no room = %v; want ErrWaitTimeout with a delay", err)
		}
		after := snap(t, p)
		if calls.Load() != 1 || !near(after.Rate("tpd").Level, before.Rate("tpd").Level, 1) || !near(after.Rate("rpd").Level, before.Rate("rpd").Level, 0.01) {
			t.Errorf("a job handed back charged the budget or called the provider: calls %d, TPD %v -> %v", calls.Load(), before.Rate("tpd").Level, after.Rate("tpd").Level)
		}
	})
}

// A cancelled context stops Run at once and is returned as is.
func TestRunContextCancelled(t *testing.T) {
	b := redistest.Mini(t)
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 100_000}})
	ctx, cancel := context.WithCancel(context.Background())
	_, err := retry.Run(ctx, p, pacer.Request{Tokens: 10}, func(ctx context.Context) (int, error) {
		cancel()
		<-ctx.Done()
		return 0, ctx.Err()
	}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v; want context.Canceled", err)
	}
	if _, err := retry.Run[int](context.Background(), p, pacer.Request{}, nil, nil); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("Run(nil call) = %v; want ErrInvalid", err)
	}
}

// A latency budget shorter than the provider's delay stops Run instead of
// waiting past it. Without the budget, eight failures would cost backoffs
// of at least 0.2 + 0.4 + 0.8 + 1.6 + 2 + 2 + 2 + 2 s (half of 400 ms
// doubling, capped at 4 s): 11 s. With it, Run stops at the first backoff
// that would end past 600 ms, after a call or two. The bound between the
// two, 5 s, holds on a loaded machine, where a call may take a second.
func TestRunLatencyBudget(t *testing.T) {
	b := redistest.Mini(t)
	fp, client := startProvider(t, fakeprovider.Config{TokenLimit: 1_000_000})
	if err := fp.Fail(8, 503); err != nil {
		t.Fatal(err)
	}
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 100_000}})
	start := time.Now()
	_, err := retry.Run(context.Background(), p, pacer.Request{Tokens: 10},
		func(ctx context.Context) (usage, error) { return client.Chat(ctx, 5, 5, 5) }, usage.Total,
		retry.WithRetries(10), retry.WithBackoff(400*time.Millisecond, 4*time.Second), retry.WithLatencyBudget(600*time.Millisecond))
	if !errors.Is(err, retry.ErrExhausted) {
		t.Errorf("Run = %v; want ErrExhausted", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v with a 600ms latency budget", d)
	}
	if n := fp.Stats().Calls; n < 1 || n > 3 {
		t.Errorf("provider saw %d calls; want 1 to 3 within the budget", n)
	}
}

// Every failed attempt's lease ends with its failure, from Lease.Fail: one
// Ended event with the verdict, the request's tokens and the call's error;
// a success's Ended carries none.
func TestRunFailedEvents(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	var mu sync.Mutex
	var failed []pacer.Event
	p := newPacer(t, b, pacer.Config{
		Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1000, RPM: 100},
		Observe: func(e pacer.Event) {
			if e.Kind == pacer.Ended && e.Verdict != (classify.Verdict{}) {
				mu.Lock()
				failed = append(failed, e)
				mu.Unlock()
			}
		},
	})
	take := func() []pacer.Event {
		mu.Lock()
		defer mu.Unlock()
		out := failed
		failed = nil
		return out
	}

	boom := errors.New("bad request")
	_, err := retry.Run(ctx, p, pacer.Request{Tokens: 50}, func(context.Context) (int, error) { return 0, boom }, nil,
		retry.WithClassifier(func(error) classify.Verdict { return classify.Verdict{Kind: classify.Permanent, Status: 400} }), retry.WithNoWait())
	if !errors.Is(err, boom) {
		t.Fatalf("Run(WithNoWait) = %v; want the call's error", err)
	}
	if e := take(); len(e) != 1 || e[0].Verdict.Kind != classify.Permanent || e[0].Tokens != 50 || !errors.Is(e[0].Err, boom) {
		t.Errorf("failed Ended events = %+v; want one, permanent, 50 tokens, the call's error", e)
	}

	// Two transient failures, then a success: two events, one an attempt.
	n := 0
	_, err = retry.Run(ctx, p, pacer.Request{Tokens: 20, Priority: pacer.Batch}, func(context.Context) (int, error) {
		if n++; n <= 2 {
			return 0, boom
		}
		return 1, nil
	}, nil, retry.WithClassifier(func(error) classify.Verdict { return classify.Verdict{Kind: classify.Transient, Status: 500} }),
		retry.WithBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatalf("Run = %v; want a success at the third attempt", err)
	}
	if e := take(); len(e) != 2 || e[0].Priority != pacer.Batch || e[1].Tokens != 20 || e[1].Verdict.Kind != classify.Transient {
		t.Errorf("failed Ended events = %+v; want two, batch, 20 tokens, transient", e)
	}
}

// An exhausted quota stops the budget for every process: retry.Run hands
// the verdict to Lease.Fail, as the transport of pacerhttp does (Run used
// to return it without stopping anything).
func TestRunQuotaStopsEveryPacer(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100}, QuotaProbe: time.Hour}
	ps := newPacers(t, b, 3, cfg)
	quota := errors.New("insufficient_quota")
	calls := 0
	_, err := retry.Run(ctx, ps[0], pacer.Request{Tokens: 10}, func(context.Context) (int, error) { calls++; return 0, quota }, nil,
		retry.WithClassifier(func(error) classify.Verdict { return classify.Verdict{Kind: classify.QuotaExhausted, Status: 429} }))
	if !errors.Is(err, quota) || !errors.Is(err, pacer.ErrQuotaExhausted) || calls != 1 {
		t.Fatalf("Run = %v after %d calls; want the call's error, matching ErrQuotaExhausted, after one call", err, calls)
	}
	for i, p := range ps {
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 10}); !errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Errorf("pacer %d: TryAcquire after Run met an exhausted quota = %v; want ErrQuotaExhausted", i, err)
		}
	}
}

// A 429 that names no delay pauses the budget for Run's own delay: the
// verdict Fail gets carries it, and the Attempt reports it.
func TestRunRateLimitPausesForItsDelay(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	ps := newPacers(t, b, 2, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100}})
	var got []retry.Attempt
	asked := time.Now()
	_, err := retry.Run(ctx, ps[0], pacer.Request{Tokens: 10}, func(context.Context) (int, error) { return 0, errors.New("429") }, nil,
		retry.WithClassifier(func(error) classify.Verdict { return classify.Verdict{Kind: classify.RateLimited, Status: 429} }),
		retry.WithRetries(0), retry.WithOnAttempt(func(a retry.Attempt) { got = append(got, a) }))
	if !errors.Is(err, retry.ErrRateLimited) {
		t.Fatalf("Run = %v; want ErrRateLimited", err)
	}
	if len(got) != 1 || got[0].Verdict.RetryAfter != time.Second {
		t.Errorf("attempts %+v; want one whose verdict waits Run's default second", got)
	}
	// The pause began after asked: what remains of it is at most the
	// second and at least that less the time since (a loaded machine may
	// take long between the pause and this read).
	if s := snap(t, ps[1]); s.Paused > time.Second || s.Paused < time.Second-time.Since(asked)-time.Millisecond {
		t.Errorf("the other process's budget paused %v; want what remains of Run's second", s.Paused)
	}
}

// pacer.RetryAfter reads the provider's wait from an *Error, however
// wrapped, and none when the provider named none.
func TestErrorRetryAfter(t *testing.T) {
	said := &retry.Error{Verdict: classify.Verdict{Kind: classify.RateLimited, RetryAfter: 3 * time.Second}, Attempts: 1, Err: errors.New("429")}
	silent := &retry.Error{Verdict: classify.Verdict{Kind: classify.RateLimited}, Attempts: 1, Err: errors.New("429")}
	for _, c := range []struct {
		name string
		err  error
		want time.Duration
		ok   bool
	}{
		{"run, provider said", said, 3 * time.Second, true},
		{"run, provider silent", silent, 0, false},
		{"wrapped", fmt.Errorf("job 7: %w", said), 3 * time.Second, true},
	} {
		if d, ok := pacer.RetryAfter(c.err); ok != c.ok || d != c.want {
			t.Errorf("%s: RetryAfter(%v) = %v, %v; want %v, %v", c.name, c.err, d, ok, c.want, c.ok)
		}
	}
	if !errors.Is(said, retry.ErrRateLimited) || errors.Is(said, retry.ErrExhausted) || errors.Is(said, pacer.ErrQuotaExhausted) {
		t.Errorf("errors.Is(%v): want ErrRateLimited only", said)
	}
}
