package pacer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/llmpacer/llmpacer/internal/leasing"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// Acquire waits until every limit of the budget has room for r, charges
// them all, and returns the lease. End the lease with Settle (or Release if
// the call failed) as soon as the call returns.
//
// The wait is bounded by Config.MaxWait (or r.MaxWait) and by ctx. When the
// script's answer shows that the bound is too short, Acquire returns a
// *WaitError (errors.Is ErrWaitTimeout) at once instead of sleeping it out.
// A request larger than a token bucket fails at once with ErrTooLarge, and
// a canceled ctx returns ctx's error as soon as ctx is done, even while
// Redis hangs. An interactive call that must wait for tokens reserves its
// turn with one script call and sleeps until then, first come, first
// served; with a concurrency limit it takes its slot only at its turn. A
// call that finds no free slot queues for one, first come, first served
// across every process: the settle that frees a slot admits the queue's
// head, and tells it, so it returns without asking again. A waiter whose
// process dies is admitted all the same, and holds that slot until its
// lease TTL ends. A call that waits for a pause asks again when the pause
// ends.
func (p *Pacer) Acquire(ctx context.Context, r Request) (*Lease, error) {
	if p.s().shadow {
		return p.TryAcquire(ctx, r)
	}
	if err := p.settleDefinition(ctx); err != nil {
		return nil, err
	}
	if err := p.checkRequest(r); err != nil {
		return nil, err
	}
	r = r.withTotal()
	a := p.newAcquisition(ctx, r, time.Now(), p.s().maxWait)
	return a.run(ctx)
}

// newAcquisition starts an Acquire of r (with its total) that began at
// began, bounded by r.MaxWait, or else by maxWait, and by ctx's deadline.
func (p *Pacer) newAcquisition(ctx context.Context, r Request, began time.Time, maxWait time.Duration) *acquisition {
	a := &acquisition{p: p, r: r, began: began, id: leasing.NewID(), bound: maxWait}
	if r.MaxWait > 0 {
		a.bound = r.MaxWait
	}
	a.deadline = a.began.Add(a.bound)
	if d, ok := ctx.Deadline(); ok && d.Before(a.deadline) {
		a.deadline, a.ctxBound = d, true
	}
	return a
}

// acquisition is one Acquire call in progress.
type acquisition struct {
	p        *Pacer
	r        Request
	began    time.Time
	bound    time.Duration
	deadline time.Time
	ctxBound bool // the deadline is ctx's
	id       string
	// ticket keeps the call's place in the slot queue, once a reply gave
	// it one; pending is its lease while admitted with a later turn but no
	// slot yet.
	ticket  int64
	pending *Lease
	charged int64              // when the pending lease was charged (µs)
	turnMs  int64              // the pending lease's turn (see wire.AcquireReply.TurnMs)
	denied  *wire.AcquireReply // the last denial slept on
	stale   int                // definitions followed during this call
	// under is the definition the call's charges were made under, once
	// queued or pending: a freed slot admits a waiter with the request it
	// queued with, and a pending lease was charged at its admission, so
	// their leases end against that definition's buckets even if another
	// is in force by then (see Define).
	under *settings
	// routed is set for a call a Group routed to this budget: start is the
	// reply route.lua gave (an admission, or a place in the slot queue),
	// charged and made under startS, which the call continues from. When
	// the call holds nothing here any more (a denial, a stop), run
	// returns errReroute: the Group routes it again, over every
	// deployment.
	routed  bool
	start   *wire.AcquireReply
	startUs int64
	startS  *settings
}

// errReroute tells a Group that its call no longer holds anything on the
// deployment it was routed to, and must be routed again.
var errReroute = errors.New("pacer: route again")

// reroute turns the stop or pause a routed call met while it waited for
// its turn (its turn given back) into errReroute: another deployment may
// have room. Any other error, or a call not routed, is returned as it is.
func (a *acquisition) reroute(err error) error {
	var se *StoppedError
	if a.routed && (errors.As(err, &se) || err == errPausedTurn) {
		return errReroute
	}
	return err
}

// errPausedTurn is untilTurn's answer to a routed call whose turn a pause
// would hold back: its turn is given back, and its Group routes it again
// rather than wait the pause out while another deployment has room.
var errPausedTurn = errors.New("pacer: the turn was paused")

func (a *acquisition) run(ctx context.Context) (*Lease, error) {
	p, r := a.p, a.r
	// next is the reply a freed slot's message stands for (see handed):
	// the waiter was admitted there, and asks the budget nothing.
	var next *wire.AcquireReply
	for {
		if err := ctx.Err(); err != nil {
			a.abandon()
			if a.denied != nil && a.ctxBound && errors.Is(err, context.DeadlineExceeded) {
				// The deadline came while waiting out a denial: no room was
				// found within the bound.
				return nil, &WaitError{wait: a.denied.Wait, Bound: a.bound, Limit: Limit(a.denied.Reason), ctxBound: true}
			}
			return nil, err
		}
		if d, down := p.down(r, a.began); down {
			a.abandon()
			if l, err := d.acquire(ctx, a); l != nil || err != nil {
				return l, err
			}
			continue // Redis answers again, or ctx is done
		}
		remain := max(time.Until(a.deadline), 0)
		var rep wire.AcquireReply
		var charged int64
		var err error
		// s: the definition this reply's charges were made under.
		var s *settings
		if next != nil {
			rep, charged, next, s = *next, next.NowUs, nil, a.under
		} else if a.start != nil {
			rep, charged, s, a.start = *a.start, a.startUs, a.startS, nil
		} else {
			s = p.s()
			rep, charged, err = p.acquireOnce(ctx, a.id, r, remain, a.ticket, a.began)
		}
		if err == nil && rep.Code == wire.Stale {
			err = p.redefined(ctx, r, &a.stale)
			if err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				continue // the loop's top says which error
			}
			a.abandon()
			if _, down := p.down(r, a.began); down {
				continue // the error tripped the circuit: fail open or closed
			}
			return nil, unavailable(err)
		}
		if err := stopped(rep); err != nil {
			p.stoppedAt.Store(time.Now().UnixNano())
			a.abandon()
			if a.routed {
				return nil, errReroute // route.lua skips a stopped deployment
			}
			p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: err.Limit, Err: err})
			return nil, err
		}
		if rep.Code == wire.Already && a.ticket != 0 && a.pending == nil && a.under != nil {
			// A waiter told it was admitted already: a freed slot admitted
			// it with the request it queued with (the message missed, or
			// not yet read), under that definition.
			s = a.under
		}
		admitted := rep.Code == wire.Admitted || rep.Code == wire.Already
		switch {
		case admitted && rep.Ticket == 0 && a.pending != nil:
			// The pending lease claimed its slot at its turn.
			ad := p.admission(a.under, r)
			ad.ID, ad.Start, ad.Expiry = a.id, a.pending.Start(), rep.Expiry
			ad.ChargedUs, ad.Waited, ad.TurnMs = a.charged, time.Since(a.began), a.turnMs
			l := p.leaseUnder(a.under, ad)
			p.emit(Event{Kind: Admitted, Tokens: r.Tokens, Priority: r.Priority, Wait: time.Since(a.began), Limit: Limit(rep.Reason)})
			return l, nil
		case admitted && rep.Ticket == 0:
			l, err := p.admit(ctx, s, a.id, r, rep, charged, a.began, a.routed)
			return l, a.reroute(err)
		case admitted:
			// Admitted with a later turn, holding no slot until then: sleep
			// until the turn, then claim a slot with the ticket.
			if err := a.reserved(ctx, s, rep, charged); err != nil {
				return nil, a.reroute(err)
			}
		case rep.Code == wire.TooLarge:
			a.abandon()
			return nil, fmt.Errorf("%w: %d tokens exceed the %s bucket's capacity (another process may run a smaller limit under the same name)", ErrTooLarge, r.Tokens, rep.Reason)
		case rep.Ticket != 0:
			// Queued for a slot: wait until a freed slot admits it, or
			// for the fallback timer.
			a.ticket, a.denied = rep.Ticket, &rep
			if a.pending == nil {
				a.under = s // the request kept with its queue entry
			}
			outcome, err := p.waitGrant(ctx, a.id, r, rep, a.deadline)
			if err != nil {
				continue // the loop's top says which error
			}
			next = a.handed(outcome)
		default:
			if a.routed && a.ticket == 0 && a.pending == nil {
				// Nothing held here: another deployment may have room.
				return nil, errReroute
			}
			if rep.Wait > remain {
				a.abandon()
				err := &WaitError{wait: rep.Wait, Bound: a.bound, Limit: Limit(rep.Reason), ctxBound: a.ctxBound}
				if a.ctxBound {
					err.Bound = time.Until(a.deadline)
				}
				p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: Limit(rep.Reason), Err: err})
				return nil, err
			}
			a.denied = &rep
			if err := p.sleep(ctx, r, rep, a.deadline); err != nil {
				continue // the loop's top says which error
			}
		}
	}
}

// reserved handles a pending admission: it keeps the lease, sleeps until
// its turn (see untilTurn), and sets the ticket that claims its slot. It
// returns ctx's error, the lease given back.
func (a *acquisition) reserved(ctx context.Context, s *settings, rep wire.AcquireReply, charged int64) error {
	p, r := a.p, a.r
	if a.pending == nil {
		a.charged, a.turnMs, a.under = charged, rep.TurnMs(), s
		ad := p.admission(s, r)
		ad.ID, ad.Start, ad.Expiry = a.id, rep.Now.Add(rep.Wait), rep.Expiry
		ad.ChargedUs, ad.Waited, ad.TurnMs, ad.Quiet = charged, time.Since(a.began)+rep.Wait, rep.TurnMs(), true
		a.pending = p.leaseUnder(s, ad)
		p.emit(Event{Kind: Waiting, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: Limit(rep.Reason)})
	}
	a.ticket = rep.Ticket
	err := p.untilTurn(ctx, a.pending, rep.Wait, a.began, a.routed)
	if err != nil {
		a.pending = nil // given back by untilTurn
	}
	return err
}

// abandon undoes what a call that gives up left in the budget: a pending
// lease is canceled (its tokens go back, and its place in the slot queue),
// a queued waiter leaves the queue, and if a freed slot admitted it
// meanwhile, that lease is canceled, its slot going to the next waiter.
func (a *acquisition) abandon() {
	switch {
	case a.pending != nil:
		a.p.giveBack(a.pending)
		a.pending = nil
	case a.ticket != 0:
		// Its ticket is the µs of its first denial: a lower bound of when
		// a freed slot can have charged it.
		s := a.under
		if s == nil {
			s = a.p.s()
		}
		a.p.leave(s, a.id, a.r, a.ticket, a.deadline)
	}
	a.ticket = 0
}

// reasonProbe is acquire.lua's reason for the probe of a stopped budget.
const reasonProbe = "probe"

// admit turns an admitted reply into a lease, sleeping first if the call's
// turn is in the future (only without a concurrency limit: with one, a
// later turn is pending, see acquisition.reserved). A ctx canceled during
// that sleep returns at once; the turn is given back in the background
// (see giveBack), so nothing stays charged for a call that is never made.
// A routed call is not held past its turn by a pause (see untilTurn).
func (p *Pacer) admit(ctx context.Context, s *settings, id string, r Request, rep wire.AcquireReply, charged int64, began time.Time, routed bool) (*Lease, error) {
	ad := p.admission(s, r)
	ad.ID, ad.Start, ad.Expiry = id, rep.Now.Add(rep.Wait), rep.Expiry
	ad.ChargedUs, ad.Waited, ad.Probe, ad.TurnMs = charged, time.Since(began)+rep.Wait, rep.Reason == reasonProbe, rep.TurnMs()
	ad.Quiet = rep.Wait > 0
	l := p.leaseUnder(s, ad)
	if rep.Reason == reasonProbe {
		rep.Reason = ""
	}
	if rep.Wait > 0 {
		p.emit(Event{Kind: Waiting, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: Limit(rep.Reason)})
	}
	if err := p.untilTurn(ctx, l, rep.Wait, began, routed); err != nil {
		return nil, err
	}
	leasing.Announce(l)
	p.emit(Event{Kind: Admitted, Tokens: r.Tokens, Priority: r.Priority, Wait: time.Since(began), Limit: Limit(rep.Reason)})
	return l, nil
}

// untilTurn sleeps until l's turn, wait from now. A pause this process set
// meanwhile (a 429 seen by a neighbour) holds the turn back until the
// pause ends, if it ends after the turn: the call keeps its turn, and the
// pause costs it at most the pause. (It used to give the turn back and
// queue again, behind every turn reserved meanwhile: with callers queued
// a few windows deep, each going back in turn, one 429 cost several
// windows; see docs/storm.md.) Other processes' turns go at their time,
// as the scripts let a reserved turn through a pause. A ctx canceled
// during the sleep returns ctx's error at once, the turn given back in the
// background.
//
// A pause may last longer than the lease: the lease is kept alive through
// it (see Lease.KeepAlive), so the call still holds its lease, and its
// slot, when it starts.
//
// A routed call (see acquisition.routed) does not wait a pause out: its
// turn given back, untilTurn returns errPausedTurn, and its Group routes it
// again, past the paused deployment.
//
// A stop this process set or met since asked (when Acquire began: the turn
// was reserved after it) makes it ask once more at the turn.
func (p *Pacer) untilTurn(ctx context.Context, l *Lease, wait time.Duration, asked time.Time, routed bool) error {
	reserved := time.Now()
	turn := reserved.Add(wait)
	alive := true // the lease may still be kept alive (see below)
	for {
		until, keep := turn, false
		if wait > 0 && p.pausedAt.Load() > reserved.UnixNano() {
			if paused := time.Unix(0, p.pausedUntil.Load()); paused.After(until) {
				if routed {
					p.giveBack(l)
					return errPausedTurn
				}
				until = paused
			}
		}
		d := time.Until(until)
		if d <= 0 {
			break
		}
		if alive && until.After(turn) {
			// The lease expires a TTL after the turn; a pause longer than
			// that would start the call on an expired lease, its slot
			// free for another. It is kept alive at two thirds of the
			// way to each expiry until the pause ends.
			if left := time.Until(l.Expiry()) * 2 / 3; d > left {
				d, keep = max(left, 10*time.Millisecond), true
			}
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			if keep && l.KeepAlive(ctx) != nil {
				// Expired, or Redis failing: the call goes at the pause's
				// end as it would have, and does not ask again.
				alive = false
			}
		case <-ctx.Done():
			t.Stop()
			p.giveBack(l)
			return ctx.Err()
		}
	}
	if wait > 0 && p.stoppedAt.Load() > asked.UnixNano() {
		// A stop came after the turn was reserved: a pending lease's claim
		// would be refused, and this turn must be too. One read, on this
		// rare path, says whether the stop still holds.
		if s, err := p.Snapshot(ctx); err == nil && s.Stopped > 0 {
			p.giveBack(l)
			return &StoppedError{Limit: s.StoppedBy, wait: s.Stopped}
		}
	}
	return nil
}

// giveBack cancels a lease nobody will use, without holding the caller. A
// cancel that fails is retried by the lease itself, in the background,
// until it lands or the lease expires (then its slot is free anyway, and
// its reservation stays charged, the safe side): see Lease.Cancel.
func (p *Pacer) giveBack(l *Lease) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = l.Cancel(ctx)
	}()
}

// sleep waits out a denial: the script's hint, plus up to 10% jitter so
// that callers told the same time do not return in one burst. The jitter
// never carries the sleep past the wait bound (less a round trip), so a
// call that still finds no room then gets its WaitError before the bound,
// not ctx's error after it.
func (p *Pacer) sleep(ctx context.Context, r Request, rep wire.AcquireReply, deadline time.Time) error {
	p.emit(Event{Kind: Waiting, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: Limit(rep.Reason)})
	d := rep.Wait + time.Duration(rand.Int64N(int64(rep.Wait/10)+1))
	if limit := time.Until(deadline) - roundTrip; d > limit {
		d = max(rep.Wait, limit)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// roundTrip is the time kept before a wait bound for the script call that
// follows a sleep.
const roundTrip = 5 * time.Millisecond

// TryAcquire admits r only if every limit has room now. It never waits: it
// returns a lease, or a *NotYetError (errors.Is ErrNotYet) that says how
// long until r could be admitted (assuming no other caller takes the room
// first), having charged nothing. It returns ErrTooLarge for a request that
// can never fit.
//
// In a shadow budget (Config.Shadow) Acquire and TryAcquire never refuse
// for want of room or Redis: they report the refusal as a Denied event and
// return a lease the budget does not count (Lease.Shadow).
func (p *Pacer) TryAcquire(ctx context.Context, r Request) (*Lease, error) {
	l, err := p.tryAcquire(ctx, r)
	if err == nil || !p.s().shadow || errors.Is(err, ErrInvalid) {
		return l, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the caller gave up: nothing to let run
	}
	// A shadow budget reports the refusal and lets the call run.
	if !errors.Is(err, ErrNotYet) && !errors.Is(err, ErrStopped) { // those emitted Denied already
		p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Err: err})
	}
	now := time.Now()
	return p.newLease(leasing.Admission{ID: leasing.NewID(), Tokens: r.withTotal().Tokens, Start: now, Expiry: now.Add(p.s().leaseTTL), Detached: true}), nil
}

func (p *Pacer) tryAcquire(ctx context.Context, r Request) (*Lease, error) {
	if err := p.settleDefinition(ctx); err != nil {
		return nil, err
	}
	if err := p.checkRequest(r); err != nil {
		return nil, err
	}
	r = r.withTotal()
	if d, down := p.down(r, time.Now()); down {
		return d.tryNow()
	}
	id := leasing.NewID()
	var rep wire.AcquireReply
	var charged int64
	var err error
	for stale := 0; ; {
		rep, charged, err = p.acquireOnce(ctx, id, r, 0, 0, time.Now())
		if err == nil && rep.Code == wire.Stale {
			if err = p.redefined(ctx, r, &stale); err == nil {
				continue
			}
		}
		if err != nil {
			if d, down := p.down(r, time.Now()); down && ctx.Err() == nil {
				return d.tryNow()
			}
			return nil, unavailable(err)
		}
		break
	}
	return p.tryAnswer(id, r, rep, charged)
}

// tryAnswer turns a reply to an acquire sent with max wait 0 into
// TryAcquire's answer: a lease, or the error that says why not.
func (p *Pacer) tryAnswer(id string, r Request, rep wire.AcquireReply, charged int64) (*Lease, error) {
	if err := stopped(rep); err != nil {
		p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: err.Limit, Err: err})
		return nil, err
	}
	switch rep.Code {
	case wire.Admitted, wire.Already:
		l := p.newLease(leasing.Admission{ID: id, Tokens: r.Tokens, Reserve: p.use(r), Weight: p.weight(r), Price: p.priceOf(r), Priced: p.s().spend, TenantKey: p.tkey(r), Start: rep.Now, Expiry: rep.Expiry, ChargedUs: charged, Probe: rep.Reason == reasonProbe, TurnMs: rep.TurnMs()})
		p.emit(Event{Kind: Admitted, Tokens: r.Tokens, Priority: r.Priority})
		return l, nil
	case wire.TooLarge:
		return nil, fmt.Errorf("%w: %d tokens exceed the %s bucket's capacity", ErrTooLarge, r.Tokens, rep.Reason)
	}
	err := &NotYetError{wait: rep.Wait, Limit: Limit(rep.Reason)}
	p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: Limit(rep.Reason), Err: err})
	return nil, err
}

// acquireOnce runs acquire.lua once, with the call's ticket (0 on its first
// attempt). It also returns the µs at which the buckets were charged, as
// settle.lua wants it: the reply's clock, or for an id admitted before (by
// an attempt whose reply go-redis lost and resent, or by a freed slot
// while it waited in the queue) a lower bound, the clock less the time
// since the call began.
func (p *Pacer) acquireOnce(ctx context.Context, id string, r Request, maxWait time.Duration, ticket int64, began time.Time) (wire.AcquireReply, int64, error) {
	v, err := p.callKeys(ctx, p.keysOf(r), lua.Acquire, p.acquireArgs(id, r, maxWait, ticket), func(v any) {
		if rep, err := wire.DecodeAcquire(v); err == nil {
			p.undoLate(rep, id, r, maxWait, ticket, began)
		}
	})
	if err != nil {
		return wire.AcquireReply{}, 0, err
	}
	rep, err := wire.DecodeAcquire(v)
	if err != nil {
		return wire.AcquireReply{}, 0, fmt.Errorf("pacer: acquire on %q: %w", p.s().name, err)
	}
	p.saw(rep)
	return rep, chargedAt(rep, began), nil
}

// undoLate undoes an acquire whose reply came after the caller gave up:
// it gives the lease back, or leaves the slot queue. (A caller that sent a
// ticket was queued before, and leaves by itself: see
// acquisition.abandon.)
func (p *Pacer) undoLate(rep wire.AcquireReply, id string, r Request, maxWait time.Duration, ticket int64, began time.Time) {
	switch {
	case rep.Code == wire.Admitted || rep.Code == wire.Already:
		p.giveBack(p.newLease(leasing.Admission{ID: id, Tokens: r.Tokens, Reserve: p.use(r), Weight: p.weight(r), Price: p.priceOf(r), Priced: p.s().spend, TenantKey: p.tkey(r), Start: rep.Now, Expiry: rep.Expiry, ChargedUs: chargedAt(rep, began), TurnMs: rep.TurnMs(), Quiet: true}))
	case rep.Ticket != 0 && ticket == 0:
		p.leave(p.s(), id, r, rep.Ticket, time.Now().Add(maxWait))
	}
}

// chargedAt returns when an admission of a call that began at began
// charged the buckets.
func chargedAt(rep wire.AcquireReply, began time.Time) int64 {
	if rep.Code == wire.Already {
		return rep.NowUs - time.Since(began).Microseconds() - 1000
	}
	return rep.NowUs
}

// acquireArgs returns acquire.lua's ARGV for r.
func (p *Pacer) acquireArgs(id string, r Request, maxWait time.Duration, ticket int64) []any {
	keep := 0.0
	if r.Priority == Batch {
		keep = p.s().keep
	}
	a := wire.Acquire{
		ID: id, Batch: r.Priority == Batch, MaxWait: maxWait, TTL: p.s().leaseTTL,
		Limit: p.s().limits.Concurrency, BatchSlots: p.batchSlots(), Spacing: 1, Ticket: ticket,
		Charges:   wire.Charges(p.bucketsOf(r), p.use(r), keep),
		Versioned: true, Version: p.s().version, Seen: p.seen.Load(),
	}
	if r.Tenant != "" && r.Priority == Interactive && p.s().share > 0 {
		// Over its share, the call leaves the batch floor of the budget.
		a.OverShare = true
		a.KeepPPM = int64(math.Round(p.s().keep * 1e6))
	}
	if c := p.s().limits.Concurrency; c > 0 {
		// Slots free up one every mean hold time / limit: how long each
		// waiter ahead in the slot queue adds (100 ms until a lease of this
		// Pacer ends).
		hold := 100.0
		if h := p.hold.Load(); h != 0 {
			hold = math.Float64frombits(h)
		}
		a.Spacing = int64(math.Ceil(hold / float64(c)))
	}
	return a.Args()
}
