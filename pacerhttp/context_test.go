package pacerhttp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// drainTo takes tokens from p's budget until its TPM level is about
// level, with a lease settled at once.
func drainTo(t *testing.T, p *pacer.Pacer, level float64) {
	t.Helper()
	ctx := context.Background()
	s, err := p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	take := int64(s.Rate("tpm").Level - level)
	if take <= 0 {
		return
	}
	l, err := p.Acquire(ctx, pacer.Request{Tokens: take})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, take); err != nil {
		t.Fatal(err)
	}
}

// The context's priority and wait bound reach Acquire: a batch call goes
// while it leaves the batch floor (20% of the bucket) free, and one that
// would dip into it, with a wait bound too short to wait for room, fails
// with ErrWaitTimeout without reaching the server; an interactive call
// with the same bound takes the room at once.
func TestContextPriorityAndMaxWait(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 1000}, fakeprovider.Config{})
		p, ev := r.pacer()
		c := r.openai(p) // default retries on
		batch := pacerhttp.ContextWithPriority(context.Background(), pacer.Batch)

		drainTo(t, p, 600)
		if _, err := c.Chat.Completions.New(batch, chatParams(100)); err != nil {
			t.Fatalf("a batch call that leaves the floor free = %v", err)
		}
		// At once: Wait counts the Acquire's round trips too, which a
		// loaded machine stretches; a call that waited for 100 tokens of
		// a TPM of 1,000 would wait 6 s.
		a := ev.of(pacer.Admitted)
		if last := a[len(a)-1]; last.Priority != pacer.Batch || last.Wait > 2*time.Second {
			t.Errorf("admitted %+v; want a batch lease, at once", last)
		}

		// About 115 tokens from 220 would leave 105, under the floor of
		// 200: the call would wait minutes for the refill (1000 a minute).
		drainTo(t, p, 220)
		calls := r.provider.Stats().Calls
		_, err := c.Chat.Completions.New(pacerhttp.ContextWithMaxWait(batch, 100*time.Millisecond), chatParams(100))
		if !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Fatalf("a batch call into the floor with MaxWait 100ms = %v; want ErrWaitTimeout", err)
		}
		if got := r.provider.Stats().Calls; got != calls {
			t.Errorf("%d requests reached the server; want none", got-calls)
		}
		// openai-go takes a transport's error for a connection error and
		// retries it (twice, after about 0.5 s and 1 s): each retry is
		// denied at once too.
		if d := ev.of(pacer.Denied); len(d) == 0 || d[0].Priority != pacer.Batch {
			t.Errorf("denied %+v; want the batch call", d)
		}

		interactive := pacerhttp.ContextWithMaxWait(context.Background(), 100*time.Millisecond)
		if _, err := c.Chat.Completions.New(interactive, chatParams(100)); err != nil {
			t.Fatalf("an interactive call with the same room = %v; want it admitted", err)
		}
		if got := r.provider.Stats().Calls; got != calls+1 {
			t.Errorf("%d requests reached the server; want 1", got-calls)
		}
		ev.balanced(t)
	})
}

// A call canceled while it waits in Acquire returns the context's error
// promptly, and nothing reaches the server.
func TestCanceledWhileWaiting(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 1000}, fakeprovider.Config{})
		p, ev := r.pacer()
		c := r.openai(p)
		drainTo(t, p, 0)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.Chat.Completions.New(ctx, chatParams(100))
			done <- err
		}()
		waitFor(t, "the call never waited", func() bool { return len(ev.of(pacer.Waiting)) > 0 })
		cancel()
		began := time.Now()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("canceled call = %v; want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the canceled call did not return within 5 s")
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("the canceled call returned %v after the cancel; want it promptly", took)
		}
		if got := r.provider.Stats().Calls; got != 0 {
			t.Errorf("%d requests reached the server; want none", got)
		}
		if n := ev.balanced(t); n != 1 { // drainTo's lease only
			t.Errorf("%d leases; want only drainTo's", n)
		}
	})
}

// The context's tenant reaches Acquire: each tenant is held to its own
// rate, here 2 requests an hour, through the real openai-go client.
func TestContextTenant(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 100_000}, fakeprovider.Config{})
		r.cfg.Tenants = pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 2, Window: time.Hour}}}
		p, _ := r.pacer()
		c := r.openai(p)
		for _, tenant := range []string{"acme", "globex"} {
			ctx := pacerhttp.ContextWithMaxWait(pacerhttp.ContextWithTenant(context.Background(), tenant), 50*time.Millisecond)
			for i := range 2 {
				if _, err := c.Chat.Completions.New(ctx, chatParams(100)); err != nil {
					t.Fatalf("tenant %s call %d = %v; want admitted", tenant, i+1, err)
				}
			}
			calls := r.provider.Stats().Calls
			if _, err := c.Chat.Completions.New(ctx, chatParams(100)); !errors.Is(err, pacer.ErrWaitTimeout) {
				t.Fatalf("tenant %s's third call in the hour = %v; want ErrWaitTimeout", tenant, err)
			}
			if got := r.provider.Stats().Calls; got != calls {
				t.Errorf("tenant %s's refused call reached the server", tenant)
			}
		}
	})
}

// A tenant in the context does not break calls through a budget without
// tenants: that budget is charged alone.
func TestContextTenantOnBudgetWithoutTenants(t *testing.T) {
	b := redistest.Mini(t)
	r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 100_000}, fakeprovider.Config{})
	p, _ := r.pacer()
	c := r.openai(p)
	if _, err := c.Chat.Completions.New(pacerhttp.ContextWithTenant(context.Background(), "acme"), chatParams(100)); err != nil {
		t.Fatalf("a call with a tenant through a budget without tenants = %v; want admitted", err)
	}
}
