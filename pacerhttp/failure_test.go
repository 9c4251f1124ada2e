package pacerhttp_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	ooption "github.com/openai/openai-go/v3/option"
)

// A stream cut mid-answer keeps its whole reservation, since the provider
// counted everything it generated; the SDK sees the error and does not
// send the call again.
func TestCutStreamKeepsReservation(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		style fakeprovider.Style
		ep    fakeprovider.Endpoint
		run   func(r *rig, p *pacer.Pacer) error // reads the stream, returns its error
	}{
		{"openai chat", fakeprovider.OpenAI, fakeprovider.ChatCompletions, func(r *rig, p *pacer.Pacer) error {
			c := r.openai(p)
			s := c.Chat.Completions.NewStreaming(ctx, chatParams(40))
			defer s.Close()
			for s.Next() {
			}
			return s.Err()
		}},
		{"openai responses", fakeprovider.OpenAI, fakeprovider.Responses, func(r *rig, p *pacer.Pacer) error {
			c := r.openai(p)
			s := c.Responses.NewStreaming(ctx, responseParams(40))
			defer s.Close()
			for s.Next() {
			}
			return s.Err()
		}},
		{"anthropic", fakeprovider.Anthropic, fakeprovider.Messages, func(r *rig, p *pacer.Pacer) error {
			c := r.anthropic(p)
			s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
				Model: anthropic.ModelClaudeSonnet4_5, MaxTokens: 40,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
			})
			defer s.Close()
			for s.Next() {
			}
			return s.Err()
		}},
		{"gemini", fakeprovider.Gemini, fakeprovider.StreamGenerateContent, func(r *rig, p *pacer.Pacer) error {
			_, _, err := r.post(r.http(p), "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
				`{"contents":[{"parts":[{"text":"Say hello"}]}],"generationConfig":{"maxOutputTokens":40}}`)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b redistest.Backend) {
				r := newRig(t, b, wide, fakeprovider.Config{Style: tc.style})
				if err := r.provider.CutStreams(1, 6); err != nil {
					t.Fatal(err)
				}
				p, ev := r.pacer()
				if err := tc.run(r, p); err == nil {
					t.Fatal("a cut stream read without error")
				}
				end := ev.ended(t, 1)[0]
				if end.End != pacer.Released || end.Used != end.Tokens {
					t.Errorf("lease ended %v using %d of %d; want released, the whole reservation kept", end.End, end.Used, end.Tokens)
				}
				s := r.provider.Stats()
				if s.StreamsCut != 1 || s.Calls != 1 || s.Endpoints[tc.ep].Calls != 1 {
					t.Errorf("provider: %d cut, %d calls (%+v); want one cut call, not sent again", s.StreamsCut, s.Calls, s.Endpoints)
				}
				if n := ev.balanced(t); n != 1 {
					t.Errorf("%d leases; want 1", n)
				}
			})
		})
	}
}

// A 429 pauses the whole budget: another Pacer (another process) waits it
// out, and the SDK's own retry reaches the provider only after the delay.
// Each request at the server is one attempt with a lease of its own: the
// SDK's retries do not multiply them.
func TestRateLimitPausesTheFleet(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // each waits out its pauses, side by side
		// The provider allows 2 requests per 6 s, refilling one per 3 s;
		// the budget believes in 20 per minute, the same rate, but starts
		// full. (At one per 1.5 s, a stall of a second between the drain
		// and the paced call shortened the pause below what it checks.)
		r := newRig(t, b, pacer.Limits{RPM: 20}, fakeprovider.Config{RequestLimit: 2, Window: 6 * time.Second})
		p1, ev1 := r.pacer()
		p2, ev2 := r.pacer()
		c1, c2 := r.openai(p1), r.openai(p2) // default retries on
		ctx := context.Background()
		if _, err := c1.Chat.Completions.New(ctx, chatParams(10)); err != nil {
			t.Fatal(err)
		}
		// A caller outside the pacer takes what is left, so that the next
		// paced call meets a 429 however long the first one took.
		drained := 0
		for {
			drained++
			status, body, err := r.post(http.DefaultClient, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`)
			if err != nil || drained > 5 {
				t.Fatalf("draining the provider: %d %s, %v", status, body, err)
			}
			if status == http.StatusTooManyRequests {
				break
			}
		}
		limited := make(chan error, 1)
		go func() {
			_, err := c1.Chat.Completions.New(ctx, chatParams(10))
			limited <- err
		}()
		waitFor(t, "no Paused event after the 429", func() bool { return len(ev1.of(pacer.Paused)) > 0 })
		pause := ev1.of(pacer.Paused)[0].Wait
		if pause < 500*time.Millisecond {
			t.Fatalf("paused %v; want about the 3 s the provider asked for", pause)
		}
		if _, err := c2.Chat.Completions.New(ctx, chatParams(10)); err != nil {
			t.Fatalf("the other process's call = %v; want it to wait out the pause", err)
		}
		if err := <-limited; err != nil {
			t.Fatalf("the call that met a 429 = %v; want its retry to succeed after the pause", err)
		}

		in := r.rec.arrivals()
		if paced := len(in) - drained; paced != 4 {
			t.Fatalf("%d paced requests reached the server; want 4: the first call, the 429, its retry, the other process's call", paced)
		}
		// The pause began once the 429 was answered, so a request sent
		// after it arrives at least its length after the 429 did (1 ms for
		// the Redis clock's rounding).
		at429 := in[len(in)-3].at
		for i, a := range in[len(in)-2:] {
			if d := a.at.Sub(at429); d < pause-time.Millisecond {
				t.Errorf("request %d after the 429 arrived %v after it; want at least the pause, %v", i+1, d, pause)
			}
		}
		s := r.provider.Stats()
		if s.RateLimited != 2 {
			t.Errorf("provider: %d 429s; want 2, the drain's and the paced call's, none after the pause", s.RateLimited)
		}
		if a := len(ev1.of(pacer.Admitted)) + len(ev2.of(pacer.Admitted)); a != 4 {
			t.Errorf("%d leases for 4 paced requests; want one per request", a)
		}
		ev1.balanced(t)
		ev2.balanced(t)
	})
}

// clock moves a test's Redis clock: miniredis's by SetTime, a real
// Redis's by sleeping.
type clock struct {
	b   redistest.Backend
	now time.Time
}

// newClock stops miniredis's clock at the present.
func newClock(b redistest.Backend) *clock {
	c := &clock{b: b, now: time.Now()}
	if b.Mini != nil {
		b.Mini.SetTime(c.now)
	}
	return c
}

// advance moves the clock d ahead.
func (c *clock) advance(d time.Duration) {
	if c.b.Mini == nil {
		time.Sleep(d)
		return
	}
	c.now = c.now.Add(d)
	c.b.Mini.SetTime(c.now)
}

// A quota error stops every process: another Pacer's transport fails at
// once with ErrQuotaExhausted and nothing reaches the provider. Once the
// provider serves again, one probe per interval goes through, and its
// success resumes the budget for every Pacer.
func TestQuotaStopsAndProbeResumesTheFleet(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // the real clocks' lanes wait out their probes side by side
		clk := newClock(b)
		// On miniredis the clock moves only when the test says, so the
		// probe is due exactly when it does. A real clock runs on: the
		// interval must outlast the steps of the stopped phase on a loaded
		// machine, or one of them would become the probe.
		probe := 200 * time.Millisecond
		if b.Mini == nil {
			probe = 4 * time.Second
		}
		r := newRig(t, b, wide, fakeprovider.Config{})
		r.cfg.QuotaProbe = probe // a stop's probe interval: the budget's, not the transport's
		p1, ev1 := r.pacer()
		p2, ev2 := r.pacer()
		ctx := context.Background()
		// No SDK retries here: a transport error is a connection error to
		// the SDK, which retries it after 0.5 s and 1 s; on a running clock
		// a retry past the probe interval would be the probe, and the
		// count of requests would depend on timing.
		c1 := r.openaiAt(p1, "/v1/", []ooption.RequestOption{ooption.WithMaxRetries(0)})

		r.provider.StopQuota()
		if _, err := c1.Chat.Completions.New(ctx, chatParams(10)); err == nil {
			t.Fatal("a call to a provider out of quota succeeded")
		}
		if s, err := p2.Snapshot(ctx); err != nil || !errors.Is(s.StoppedBy, pacer.ErrQuotaExhausted) || s.Stopped <= 0 {
			t.Fatalf("snapshot %+v, %v; want stopped by quota", s, err)
		}
		began := time.Now()
		_, _, err := r.post(r.http(p2), "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
		if !errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Fatalf("another process's call = %v; want ErrQuotaExhausted", err)
		}
		if took := time.Since(began); took > 3*time.Second {
			t.Errorf("the refusal took %v; want it at once, not at a probe", took)
		}
		if b.Mini != nil {
			// The SDK retries the refusal as a connection error, twice
			// with its default retries; on a stopped clock no probe comes
			// due, and each retry is refused too.
			denied := len(ev2.of(pacer.Denied))
			c := r.openai(p2)
			if _, err := c.Chat.Completions.New(ctx, chatParams(10)); !errors.Is(err, pacer.ErrQuotaExhausted) {
				t.Fatalf("the other process's SDK call = %v; want ErrQuotaExhausted", err)
			}
			if got := len(ev2.of(pacer.Denied)) - denied; got != 3 {
				t.Errorf("%d refusals for one SDK call; want 3, the call and its two retries", got)
			}
		}
		if got := r.provider.Stats().Calls; got != 1 {
			t.Fatalf("%d requests reached the provider; want only the one that met the quota error", got)
		}

		r.provider.ResumeQuota()
		clk.advance(probe + probe/4)
		c2 := r.openai(p2) // default retries: the probe succeeds at once
		if _, err := c2.Chat.Completions.New(ctx, chatParams(10)); err != nil {
			t.Fatalf("the probe after ResumeQuota = %v; want it through", err)
		}
		if got := r.provider.Stats().Calls; got != 2 {
			t.Errorf("%d requests reached the provider; want 2: the quota error and one probe", got)
		}
		for i, p := range []*pacer.Pacer{p1, p2} {
			waitFor(t, "the budget is still stopped", func() bool {
				s, err := p.Snapshot(ctx)
				return err == nil && s.Stopped == 0
			})
			c := r.openai(p)
			if _, err := c.Chat.Completions.New(ctx, chatParams(10)); err != nil {
				t.Errorf("process %d after the probe: %v; want the budget resumed", i+1, err)
			}
		}
		ev1.balanced(t)
		ev2.balanced(t)
	})
}

// An SDK's retry after a 5xx sends the very same body, and each attempt
// takes a lease of its own: the failed one released (the provider may have
// worked on it), the retry settled.
func TestRetryAfter5xxSendsTheSameBody(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, wide, fakeprovider.Config{})
		if err := r.provider.Fail(1, http.StatusInternalServerError); err != nil {
			t.Fatal(err)
		}
		p, ev := r.pacer()
		c := r.openai(p) // default retries on
		ctx := context.Background()
		reply, err := c.Chat.Completions.New(ctx, chatParams(20))
		if err != nil {
			t.Fatalf("chat after one 500 = %v; want the SDK's retry to succeed", err)
		}
		in := r.rec.arrivals()
		if len(in) != 2 || !bytes.Equal(in[0].body, in[1].body) || len(in[0].body) == 0 {
			t.Fatalf("the server received %d requests; want 2 with identical bodies", len(in))
		}
		if a := ev.of(pacer.Admitted); len(a) != 2 || a[0].Tokens != a[1].Tokens {
			t.Fatalf("admitted %+v; want one lease per attempt, of the same reservation", a)
		}
		ends := ev.ended(t, 2)
		if ends[0].End != pacer.Released || ends[0].Used != ends[0].Tokens {
			t.Errorf("the failed attempt's lease ended %v using %d; want released with its reservation", ends[0].End, ends[0].Used)
		}
		if ends[1].End != pacer.Settled || ends[1].Used != reply.Usage.TotalTokens {
			t.Errorf("the retry's lease ended %v using %d; want settled with %d", ends[1].End, ends[1].Used, reply.Usage.TotalTokens)
		}
		ev.balanced(t)
	})
}

// A budget paused and then stopped answers a call with the stop, at once:
// the transport does not wait the pause out, and nothing is sent.
func TestStoppedWhilePausedFailsAtOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, wide, fakeprovider.Config{})
		p, _ := r.pacer()
		ctx := context.Background()
		if err := p.Pause(ctx, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		_, _, err := r.post(r.http(p), "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
		if !errors.Is(err, pacer.ErrStopped) {
			t.Fatalf("a call on a paused, then stopped budget = %v; want ErrStopped", err)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("the refusal took %v; want it at once, not after the pause", took)
		}
		if got := r.provider.Stats().Calls; got != 0 {
			t.Errorf("%d requests reached the provider; want none", got)
		}
	})
}
