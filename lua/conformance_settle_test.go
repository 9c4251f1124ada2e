package lua_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
)

// vend is how a lease ends, or a keep-alive.
type vend struct {
	How  string `json:"how"`            // settle, settle_usage, release, reject, cancel or keepalive
	Used int64  `json:"used,omitempty"` // settle's used tokens
	// settle_usage's input and output used (Lease.SettleUsage).
	Input  int64 `json:"input,omitempty"`
	Output int64 `json:"output,omitempty"`
	// CachedInput is the part of input read from the provider's cache,
	// priced at Price.CachedInput.
	CachedInput int64 `json:"cached_input,omitempty"`
}

func (e vend) run(l *pacer.Lease) error {
	ctx := context.Background()
	switch e.How {
	case "settle":
		return l.Settle(ctx, e.Used)
	case "settle_usage":
		return l.SettleUsage(ctx, pacer.Usage{Input: e.Input, Output: e.Output, CachedInput: e.CachedInput})
	case "release":
		return failRelease(ctx, l)
	case "reject":
		return failReject(ctx, l)
	case "cancel":
		return l.Cancel(ctx)
	case "keepalive":
		// One tick of the keep-alive loop, a third of the lease TTL on
		// (the bubble's clock); a renewal that finds the lease gone
		// marks it expired.
		stop := l.KeepAlive(ctx)
		time.Sleep(defaultLeaseTTL / 3)
		synctest.Wait()
		stop()
		if l.Info().State == pacer.Expired {
			return pacer.ErrLeaseExpired
		}
		return nil
	}
	panic("unknown end " + e.How)
}

type settleCase struct {
	Config string `json:"config"`
	Tokens int64  `json:"tokens"` // reserved
	// Input and Output split the reservation (Tokens is their sum).
	Input  int64 `json:"input,omitempty"`
	Output int64 `json:"output,omitempty"`
	// Model and Tenant are the request's (Request.Model, Request.Tenant).
	Model  string `json:"model,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	End    vend   `json:"end"`
	// Keys are settle's KEYS, for a tenant's lease.
	Keys []string `json:"keys,omitempty"`
	// Args is settle's ARGV for a lease admitted at now_us (its charge
	// time); the lease id is "<id>".
	Args []string `json:"args"`
}

func settleVectors(t *testing.T) any {
	ends := func(config string, tokens int64, es ...vend) []settleCase {
		var cs []settleCase
		for _, e := range es {
			cs = append(cs, settleCase{Config: config, Tokens: tokens, End: e})
		}
		return cs
	}
	s := func(used int64) vend { return vend{How: "settle", Used: used} }
	su := func(in, out int64) vend { return vend{How: "settle_usage", Input: in, Output: out} }
	splitEnds := func(config string, in, out int64, es ...vend) []settleCase {
		cs := ends(config, in+out, es...)
		for i := range cs {
			cs[i].Input, cs[i].Output = in, out
		}
		return cs
	}
	release, reject, cancel := vend{How: "release"}, vend{How: "reject"}, vend{How: "cancel"}
	var cases []settleCase
	cases = append(cases, ends("basic", 1300, s(1000), s(1300), s(1700), s(0), s(10_000_000), release, reject, cancel)...)
	cases = append(cases, ends("everything", 4000, s(1000), s(5000), release, reject, cancel)...)
	cases = append(cases, ends("headroom", 1300, s(300), cancel)...)
	cases = append(cases, ends("headroom", 5000, s(4000), s(5001), cancel)...)
	cases = append(cases, ends("floor-default", 100, s(50), reject, cancel)...)
	cases = append(cases, ends("concurrency-only", 0, s(10), cancel)...)
	cases = append(cases, ends("fast", 3, s(1), s(0), cancel)...)
	cases = append(cases, ends("daily", 5000, s(4999), cancel)...)
	// A split reservation: each input and output bucket gets its own
	// difference, token buckets the sum's. Less input and more output than
	// reserved (and the reverse) send a give-back and a debt at once.
	// Settle with the total alone gives an input or output bucket back only
	// what its part exceeds the total by, and charges it nothing.
	cases = append(cases, splitEnds("rates", 1000, 300,
		su(800, 200), su(1000, 300), su(1200, 500), su(800, 500), su(1100, 100), su(0, 0), su(50_000, 10_000),
		s(1000), s(200), s(1300), s(5000), release, reject, cancel)...)
	// Issue 21's call: the prompt undercounted (16 estimated, 25 used: a
	// debt to the input rate), the answer far short of max_tokens (300
	// reserved, 7 used: a give-back to the output rate and, net, to the
	// tokens rate).
	cases = append(cases, splitEnds("rates", 16, 300, su(25, 7))...)
	// The same on strict sliding windows: a debt to the output window, a
	// give-back off the tokens window's sub-window and the per-minute TPM.
	cases = append(cases, splitEnds("rates-exact", 1000, 500, su(100, 700))...)
	// A reservation not split: an input or output bucket was charged all
	// of it.
	cases = append(cases, ends("rates", 1300, su(800, 200), su(1000, 600), s(1000), s(1500), cancel)...)
	// NoRefund: nothing back; debts still charged, each part's own.
	cases = append(cases, splitEnds("rates-windows", 5000, 1000,
		su(4000, 500), su(6000, 500), su(4000, 1500), s(5000), s(7000), release, reject, cancel)...)
	cases = append(cases, ends("rates-windows", 3000, su(2000, 500), su(4000, 200), s(3500))...)
	// Strict sliding windows: a give-back names the sub-window the call was
	// counted in ("<units>@<sub-window>"), a debt is counted now.
	cases = append(cases, ends("rates-exact", 1000, s(600), s(1000), s(1500), release, reject, cancel)...)
	cases = append(cases, splitEnds("rates-exact", 1000, 500, su(800, 200), su(1000, 900), cancel)...)
	// Without input or output rates a split changes nothing: the sum counts.
	cases = append(cases, splitEnds("basic", 1000, 300, su(800, 200), su(1000, 700), s(1000))...)
	// Weights, prices and tenants: a lease ends against what it was
	// charged. Usage is weighed as the reservation was, and priced: a
	// total alone at the dearest price, a split at each part's, cached
	// input at its own. A tenant's share ('%') is sent "<µs>:<allow>".
	with := func(cs []settleCase, model, tenant string) []settleCase {
		for i := range cs {
			cs[i].Model, cs[i].Tenant = model, tenant
		}
		return cs
	}
	cached := func(in, c, out int64) vend { return vend{How: "settle_usage", Input: in, CachedInput: c, Output: out} }
	cases = append(cases, with(splitEnds("spend", 1000, 500, su(800, 200), cached(800, 600, 200), su(1200, 900), s(1000), s(2000), release, reject, cancel), "gpt-4o", "")...)
	cases = append(cases, with(ends("spend", 1500, s(1000), su(700, 300), cancel), "claude-sonnet-4", "")...)
	cases = append(cases, with(splitEnds("weights", 800, 200, su(500, 100), su(900, 300), s(1500), cancel), "gpt-4o", "")...)
	cases = append(cases, with(ends("tenants", 1300, s(1000), s(2000), release, reject, cancel), "", "acme")...)
	cases = append(cases, with(splitEnds("tenants-share", 800, 200, su(500, 100), su(900, 400), cancel), "", "acme")...)
	cases = append(cases, with(splitEnds("tenants-spend", 1000, 500, su(800, 200), su(1500, 700), cancel), "m", "acme")...)
	cases = append(cases, with(splitEnds("tenant-spend-only", 1000, 500, su(500, 100), cancel), "", "acme")...)
	for i := range cases {
		c := &cases[i]
		cfg := configByName(t, c.Config)
		inBubble(t, cfg.config(), func(p *pacer.Pacer, f *fakeWire) {
			f.queue(admitted(cfg.ttl()))
			l, err := p.TryAcquire(context.Background(), pacer.Request{Tokens: c.Tokens, Input: c.Input, Output: c.Output, Model: c.Model, Tenant: c.Tenant})
			if err != nil {
				t.Fatalf("%s: TryAcquire(%d): %v", c.Config, c.Tokens, err)
			}
			f.take()
			f.queue([]any{int64(1), nowUs + 1000})
			if err := c.End.run(l); err != nil {
				t.Fatalf("%s: %s: %v", c.Config, c.End.How, err)
			}
			call := only(t, c.Config+" "+c.End.How, f.take())
			c.Args = call.Args
			if c.Tenant != "" {
				c.Keys = call.Keys
			}
		})
	}
	return map[string]any{
		"comment": "What settle is sent when a lease of tokens, charged at now_us = " + itoa(nowUs) + ", ends: " +
			"ARGV = {<id>, charged_us, then a field and its correction in µs for each bucket it changes}. " +
			"input and output: the reservation split (tokens their sum). end.how settle_usage: the input and output used apart (Lease.SettleUsage).",
		"cases": cases,
	}
}

// vstep is one call on a lease and what the Go client makes of its reply.
type vstep struct {
	vend
	// Reply answers the call; Fail true makes it fail instead (a reply
	// lost on the way: the call may or may not have run).
	Reply any  `json:"reply,omitempty"`
	Fail  bool `json:"fail,omitempty"`
	// What happened: whether a script ran (a lease that has ended calls
	// none), its ARGV, the error (expired, redis, bad_reply), and the
	// lease's state, hold time and expiry afterwards.
	Called   bool     `json:"called"`
	Args     []string `json:"args,omitempty"`
	Error    string   `json:"error,omitempty"`
	State    string   `json:"state"`
	HeldUs   int64    `json:"held_us"`
	ExpiryMs int64    `json:"expiry_ms"`
}

type leaseSequence struct {
	Name  string  `json:"name"`
	Steps []vstep `json:"steps"`
}

func leaseReplyVectors(t *testing.T) any {
	const n = nowUs
	expiry := n/1000 + defaultLeaseTTL.Milliseconds() // "basic"
	us := func(d time.Duration) int64 { return n + d.Microseconds() }
	ok := func(e vend, at int64) vstep { return vstep{vend: e, Reply: []any{int64(1), at}} }
	code := func(e vend, c, at int64) vstep { return vstep{vend: e, Reply: []any{c, at}} }
	fail := func(e vend) vstep { return vstep{vend: e, Fail: true} }
	skip := func(e vend) vstep { return vstep{vend: e} } // no call expected
	settle, release, reject, cancel, keep := vend{How: "settle", Used: 1000}, vend{How: "release"}, vend{How: "reject"}, vend{How: "cancel"}, vend{How: "keepalive"}
	keepTo := func(at, exp int64) vstep { return vstep{vend: keep, Reply: []any{int64(1), at, exp}} }
	keepGone := func(at int64) vstep { return vstep{vend: keep, Reply: []any{int64(0), at, int64(0)}} }
	seqs := []leaseSequence{
		{"settled, then idempotent", []vstep{ok(settle, us(2500*time.Millisecond)), skip(settle), skip(cancel)}},
		{"expired when it ended", []vstep{code(release, 2, us(11*time.Minute)), skip(settle)}},
		{"gone, and never tried before", []vstep{code(settle, 0, us(12*time.Minute))}},
		{"gone before its expiry, never tried before: the client resent this settle after a timeout, and its first run ended it", []vstep{
			code(settle, 0, us(time.Second))}},
		{"gone just after its expiry, never tried before: the budget's keys expired with it", []vstep{
			code(settle, 0, (expiry+1)*1000)}},
		{"reply lost, then gone within a minute of the expiry: the lost attempt ended it", []vstep{
			fail(release), code(settle, 0, (expiry+59_999)*1000)}},
		{"reply lost, then gone a minute after the expiry: it expired", []vstep{
			fail(cancel), code(cancel, 0, (expiry+60_000)*1000)}},
		{"reply lost, then the retry ends it", []vstep{fail(settle), ok(settle, us(time.Second))}},
		{"reply lost, then expired", []vstep{fail(reject), code(reject, 2, us(11*time.Minute))}},
		{"kept alive, reply lost, then gone within a minute of the new expiry", []vstep{
			keepTo(us(5*time.Minute), expiry+300_000), fail(settle), code(settle, 0, (expiry+300_000+59_999)*1000)}},
		{"keep-alive finds it gone", []vstep{keepGone(us(11 * time.Minute)), skip(settle)}},
		{"keep-alive after the end", []vstep{ok(settle, us(time.Second)), skip(keep)}},
		{"a reply of the wrong shape counts as lost", []vstep{
			{vend: settle, Reply: []any{int64(1)}}, code(settle, 0, us(time.Minute))}},
		{"an unknown code counts as lost", []vstep{code(settle, 5, us(time.Second)), ok(settle, us(time.Second))}},
	}
	for i := range seqs {
		sq := &seqs[i]
		inBubble(t, configByName(t, "basic").config(), func(p *pacer.Pacer, f *fakeWire) {
			f.queue(admitted(defaultLeaseTTL))
			l, err := p.TryAcquire(context.Background(), pacer.Request{Tokens: 1300})
			if err != nil {
				t.Fatal(err)
			}
			f.take()
			for j := range sq.Steps {
				st := &sq.Steps[j]
				switch {
				case st.Fail:
					f.queue(errLost)
				case st.Reply != nil:
					f.queue(st.Reply)
				}
				err := st.run(l)
				calls := f.take()
				if st.Called = len(calls) > 0; st.Called {
					st.Args = only(t, sq.Name, calls).Args
				}
				if st.Called != (st.Fail || st.Reply != nil) {
					t.Fatalf("%s, step %d: called = %v", sq.Name, j, st.Called)
				}
				st.Error, st.State = errName(err), l.Info().State.String()
				st.HeldUs, st.ExpiryMs = l.Info().Held.Microseconds(), l.Info().Expiry.UnixMilli()
			}
		})
	}
	return map[string]any{
		"comment": "How the Go client reads settle's and keepalive's replies, on a \"basic\" lease of 1300 tokens admitted at now_us = " + itoa(n) +
			" with expiry_ms = " + itoa(expiry) + " (a 10 minute TTL). Each sequence runs on one lease. settle replies {code, now_us}: " +
			"1 ended now; 2 expired; 0 not found, which means ended by an earlier attempt whose reply was lost if there was one and " +
			"now is less than a minute past the lease's expiry, and expired otherwise. keepalive replies {code, now_us, expiry_ms}. " +
			"held_us: from the turn (start_us) to the ending settle's now_us.",
		"sequences": seqs,
	}
}

// failRelease and failReject end l as Lease.Fail ends a failed call's
// lease, telling the budget nothing: a 5xx keeps the reservation
// (released), a 400 gives the tokens back (rejected).
func failRelease(ctx context.Context, l *pacer.Lease) error {
	return l.Fail(ctx, classify.Verdict{Kind: classify.Transient, Status: 500}, nil)
}

func failReject(ctx context.Context, l *pacer.Lease) error {
	return l.Fail(ctx, classify.Verdict{Kind: classify.Permanent, Status: 400}, nil)
}
