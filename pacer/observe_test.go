package pacer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// Each kind of event is logged at the level that says who should look,
// with the attributes it carries.
func TestSlogObserverLevels(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name  string
		e     pacer.Event
		level slog.Level
		attrs string // in the text handler's form, after msg
	}{
		{"admitted", pacer.Event{Kind: pacer.Admitted, Tokens: 10, Wait: time.Second}, slog.LevelDebug, "budget=b tokens=10 priority=interactive waited=1s"},
		{"waiting", pacer.Event{Kind: pacer.Waiting, Tokens: 10, Limit: "tpm", Wait: time.Second}, slog.LevelDebug, "budget=b tokens=10 priority=interactive limit=tpm wait=1s"},
		{"denied", pacer.Event{Kind: pacer.Denied, Tokens: 10, Priority: pacer.Batch, Limit: "rpm", Wait: 2 * time.Minute, Err: boom}, slog.LevelWarn, "budget=b tokens=10 priority=batch limit=rpm retry_after=2m0s err=boom"},
		{"not yet", pacer.Event{Kind: pacer.Denied, Tokens: 10, Limit: "rpm", Wait: time.Second, Err: pacer.NotYet(time.Second, "rpm")}, slog.LevelDebug, ""},
		{"no room within the bound", pacer.Event{Kind: pacer.Denied, Tokens: 10, Limit: "rpm", Wait: time.Minute, Err: pacer.TooLong(time.Minute, time.Second, "rpm")}, slog.LevelWarn, ""},
		{"settled", pacer.Event{Kind: pacer.Ended, End: pacer.Settled, Tokens: 10, Used: 7, Held: time.Second}, slog.LevelDebug, "budget=b end=settled tokens=10 used=7 held=1s"},
		{"expired", pacer.Event{Kind: pacer.Ended, End: pacer.Expired, Tokens: 10, Used: 10, Err: pacer.ErrLeaseExpired}, slog.LevelWarn, ""},
		{"paused", pacer.Event{Kind: pacer.Paused, Limit: "tpm", Wait: time.Second}, slog.LevelInfo, "budget=b limit=tpm pause=1s"},
		{"quota", pacer.Event{Kind: pacer.Paused, Err: pacer.ErrQuotaExhausted, Wait: time.Hour}, slog.LevelWarn, "budget=b stop=1h0m0s"},
		{"stop", pacer.Event{Kind: pacer.Paused, Err: pacer.ErrStopped, Wait: time.Hour}, slog.LevelWarn, ""},
		{"resumed", pacer.Event{Kind: pacer.Resumed}, slog.LevelInfo, "budget=b"},
		{"redis down", pacer.Event{Kind: pacer.Redis, Err: boom}, slog.LevelWarn, "budget=b err=boom"},
		{"redis up", pacer.Event{Kind: pacer.Redis, Wait: 3 * time.Second}, slog.LevelInfo, "budget=b down=3s"},
		{"local", pacer.Event{Kind: pacer.Admitted, Tokens: 10, Local: true}, slog.LevelDebug, "budget=b tokens=10 priority=interactive waited=0s local=true"},
		{"failed", pacer.Event{Kind: pacer.Ended, End: pacer.Released, Tokens: 10, Used: 10, Verdict: classify.Verdict{Kind: classify.RateLimited, Status: 429, Code: "rate_limit_exceeded", Provider: "openai", RetryAfter: time.Second}, Err: boom}, slog.LevelWarn,
			"budget=b end=released tokens=10 used=10 held=0s priority=interactive verdict=rate_limited status=429 code=rate_limit_exceeded provider=openai retry_after=1s err=boom"},
		{"canceled", pacer.Event{Kind: pacer.Ended, End: pacer.Released, Verdict: classify.Verdict{Kind: classify.Canceled}, Err: context.Canceled}, slog.LevelInfo, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime}))
			c.e.Name = "b"
			pacer.SlogObserver(log)(c.e)
			line := strings.TrimSpace(buf.String())
			if want := "level=" + c.level.String(); !strings.HasPrefix(line, want+" ") {
				t.Errorf("logged %q; want it at %s", line, want)
			}
			if c.attrs != "" && !strings.HasSuffix(line, `" `+c.attrs) {
				t.Errorf("logged %q; want attributes %q", line, c.attrs)
			}
		})
	}
}

// Levels below the logger's build no attributes and log nothing.
func TestSlogObserverDisabled(t *testing.T) {
	var buf bytes.Buffer
	observe := pacer.SlogObserver(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	observe(pacer.Event{Kind: pacer.Admitted, Name: "b"})
	observe(pacer.Event{Kind: pacer.Paused, Name: "b"})
	if buf.Len() != 0 {
		t.Errorf("logged %q at level Warn; want nothing", buf.String())
	}
	if n := testing.AllocsPerRun(100, func() { observe(pacer.Event{Kind: pacer.Admitted, Name: "b"}) }); n != 0 {
		t.Errorf("a disabled event allocates %v times; want 0", n)
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// Log what a budget does, at Info and above: pauses, quota stops and the
// calls they refuse, resumes and expired leases. Beside a metrics
// collector, in one closure.
func ExampleSlogObserver() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mr.SetTime(now) // a still clock: exact output
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: dropTime})) // Info and above
	logEvent := pacer.SlogObserver(log)
	count := 0
	p, err := pacer.New(rdb, pacer.Config{
		Name:     "openai:gpt-4o-mini",
		Limits:   pacer.Limits{RPM: 500, TPM: 200_000},
		LeaseTTL: time.Minute,
		Observe: func(e pacer.Event) {
			logEvent(e)
			count++ // e.g. pacerprom's Observe
		},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	l, _ := p.Acquire(ctx, pacer.Request{Tokens: 1300}) // Debug: not shown
	_ = pacer.StopQuota(ctx, p, time.Hour, 0)
	_, err = p.TryAcquire(ctx, pacer.Request{Tokens: 100})
	_ = p.Resume(ctx)
	_ = p.Pause(ctx, 2*time.Second)
	mr.SetTime(now.Add(2 * time.Minute)) // past the lease's TTL
	_ = l.Settle(ctx, 420)
	fmt.Println(count, "events;", errors.Is(err, pacer.ErrQuotaExhausted))
	// Output:
	// level=WARN msg="llmpacer: budget stopped, provider quota exhausted" budget=openai:gpt-4o-mini stop=1h0m0s
	// level=WARN msg="llmpacer: call denied" budget=openai:gpt-4o-mini tokens=100 priority=interactive retry_after=1m0s err="pacer: budget stopped: the provider's quota is exhausted; nothing sent; the next probe is due in 1m0s (add credit or raise the quota, then Resume)"
	// level=INFO msg="llmpacer: budget resumed" budget=openai:gpt-4o-mini
	// level=INFO msg="llmpacer: budget paused" budget=openai:gpt-4o-mini pause=2s
	// level=WARN msg="llmpacer: lease expired" budget=openai:gpt-4o-mini end=expired tokens=1300 used=1300 held=0s err="pacer: lease expired before it ended; its reserved tokens stay charged"
	// 6 events; true
}
