package pacer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Acquire waits until every limit of the budget has room for r, charges
// them all, and returns the lease. End the lease with Settle (or Fail if
// the call failed) as soon as the call returns.
//
// The wait is bounded by Config.MaxWait (or r.MaxWait) and by ctx. When the
// script's answer shows that the bound is too short, Acquire returns a
// *RefusedError (errors.Is ErrWaitTimeout) at once instead of sleeping it out.
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
	c, err := p.prepare(ctx, r)
	if err != nil {
		return nil, err
	}
	a := &acquisition{c: c, id: newID(), bounds: boundsOf(ctx, c.r, time.Now(), c.s.maxWait)}
	return a.run(ctx)
}

// bounds is how long a call may wait: from began, by r.MaxWait, or else
// the budget's Config.MaxWait, and by ctx's deadline.
type bounds struct {
	began    time.Time
	bound    time.Duration
	deadline time.Time
	ctxBound bool // the deadline is ctx's
}

// boundsOf returns the bounds of a call for r that began at began, on a
// budget whose MaxWait is maxWait.
func boundsOf(ctx context.Context, r Request, began time.Time, maxWait time.Duration) bounds {
	b := bounds{began: began, bound: maxWait}
	if r.MaxWait > 0 {
		b.bound = r.MaxWait
	}
	b.deadline = began.Add(b.bound)
	if d, ok := ctx.Deadline(); ok && d.Before(b.deadline) {
		b.deadline, b.ctxBound = d, true
	}
	return b
}

// remain returns the time left until the deadline, or 0.
func (b bounds) remain() time.Duration { return max(time.Until(b.deadline), 0) }

// tooLong returns the ErrWaitTimeout refusal for a wait past the bound.
func (b bounds) tooLong(wait time.Duration, limit string) *RefusedError {
	err := &RefusedError{why: ErrWaitTimeout, wait: wait, Bound: b.bound, Limit: limit, ctxBound: b.ctxBound}
	if b.ctxBound {
		err.Bound = b.remain()
	}
	return err
}

// deadlineErr returns the error for a call whose ctx ended with err, having
// last been denied (or nil): an ErrWaitTimeout refusal if ctx's deadline, which bounds
// the wait, came while it waited out a denial, and err otherwise.
func (b bounds) deadlineErr(err error, denied *wire.AcquireReply) error {
	if denied != nil && b.ctxBound && errors.Is(err, context.DeadlineExceeded) {
		// No room was found within the bound.
		return &RefusedError{why: ErrWaitTimeout, wait: denied.Wait, Bound: b.bound, Limit: limitOfReason(denied.Reason), ctxBound: true}
	}
	return err
}

// answer is a reply to an acquire of the call c (under the definition it
// was charged under), charged at µs charged, asked with remain left.
type answer struct {
	rep     wire.AcquireReply
	c       *call
	charged int64
	remain  time.Duration
	// asked is when the call asked for this answer, on this process's
	// clock: no later than the script that made it ran. A pause this
	// process set after it may have missed the turn (see untilTurn).
	asked time.Time
}

// acquisition is one Acquire call in progress.
type acquisition struct {
	bounds
	c     *call // the call, under the definition it last asked with
	id    string
	stale int // definitions followed during this call
	// ticket keeps the call's place in the slot queue, once a reply gave
	// it one; pending is its lease while admitted with a later turn but no
	// slot yet, charged at µs charged with turn turnMs (see
	// wire.AcquireReply.TurnMs).
	ticket  int64
	pending *Lease
	charged int64
	turnMs  int64
	denied  *wire.AcquireReply // the last denial slept on
	// under is the call as charged, once queued or pending: a freed slot
	// admits a waiter with the request it queued with, and a pending lease
	// was charged at its admission, so their leases end against that
	// definition's buckets even if another is in force by then (see
	// Define).
	under *call
	// next is an answer the call acts on without asking the budget: a
	// freed slot's message (see handed), or the route a Group found it.
	next *answer
	// away, set by a Group for a call it routed here (see Group.Acquire),
	// decides what the call does when it holds nothing here any more and
	// would wait or give up with err (nil: a denial): it returns
	// errReroute to take the call back, or err. Nil: the call stays.
	away func(err error) error
}

// leave returns what run returns for a call that would wait or give up
// with err while holding nothing: its Group's choice (see away), or err.
func (a *acquisition) leave(err error) error {
	if a.away == nil {
		return err
	}
	return a.away(err)
}

func (a *acquisition) run(ctx context.Context) (*Lease, error) {
	for {
		if err := ctx.Err(); err != nil {
			a.abandon()
			return nil, a.deadlineErr(err, a.denied)
		}
		if d, down := a.c.p.down(a.c, a.began); down {
			a.abandon()
			if l, err := d.acquire(ctx, a); l != nil || err != nil {
				return l, err
			}
			continue // Redis answers again, or ctx is done
		}
		an, err := a.ask(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue // the loop's top says which error
			}
			a.abandon()
			if _, down := a.c.p.down(a.c, a.began); down {
				continue // the error tripped the circuit: fail open or closed
			}
			return nil, unavailable(err)
		}
		if an == nil {
			continue // another definition is in force: ask under it
		}
		if l, err := a.answer(ctx, *an); l != nil || err != nil {
			return l, err
		}
	}
}

// ask returns the budget's answer to the call: the next one given (see
// acquisition.next), or acquire.lua's, with the call's ticket. It returns
// nil, nil when another definition is in force, which the call follows
// and asks under.
func (a *acquisition) ask(ctx context.Context) (*answer, error) {
	remain := a.remain()
	if an := a.next; an != nil {
		a.next = nil
		an.remain = remain
		return an, nil
	}
	a.c = a.c.now()
	asked := time.Now()
	rep, charged, err := a.c.acquireOnce(ctx, a.id, remain, a.ticket, a.began)
	if err == nil && rep.Code == wire.Stale {
		var c *call
		if c, err = a.c.redefined(ctx, &a.stale); err == nil {
			a.c = c
			return nil, nil
		}
	}
	c := a.c
	if rep.Code == wire.Already && a.ticket != 0 && a.pending == nil && a.under != nil {
		// A waiter told it was admitted already: a freed slot admitted it
		// with the request it queued with (the message missed, or not yet
		// read), under that definition.
		c = a.under
	}
	if err != nil {
		return nil, err
	}
	return &answer{rep: rep, c: c, charged: charged, remain: remain, asked: asked}, nil
}

// answer acts on the budget's answer: it returns the lease, or the error
// that ends the call, or nil, nil when the call asks again.
func (a *acquisition) answer(ctx context.Context, an answer) (*Lease, error) {
	rep := an.rep
	if err := stopped(rep); err != nil {
		a.c.p.stoppedAt.Store(time.Now().UnixNano())
		a.abandon()
		if a.away != nil {
			return nil, a.leave(err) // route.lua skips a stopped deployment
		}
		a.emit(Denied, rep.Wait, err.Limit, err)
		return nil, err
	}
	admitted := rep.Code == wire.Admitted || rep.Code == wire.Already
	switch {
	case admitted && rep.Ticket == 0 && a.pending != nil:
		return a.claimed(rep), nil
	case admitted && rep.Ticket == 0:
		l, err := a.admit(ctx, an)
		return l, a.moved(err)
	case admitted:
		// Admitted with a later turn, holding no slot until then: sleep
		// until the turn, then claim a slot with the ticket.
		return nil, a.moved(a.reserved(ctx, an))
	case rep.Code == wire.TooLarge:
		a.abandon()
		return nil, fmt.Errorf("%w: %d tokens exceed the %s bucket's capacity (another process may run a smaller limit under the same name)", ErrTooLarge, a.c.r.Tokens, rep.Reason)
	case rep.Ticket != 0:
		a.queued(ctx, an)
		return nil, nil
	}
	return nil, a.deniedFor(ctx, an)
}

// moved returns the error a call that met err while it waited for its turn
// (its turn given back) ends with: its Group's choice, for a stop or a
// pause (see away); err otherwise.
func (a *acquisition) moved(err error) error {
	if errors.Is(err, ErrStopped) || err == errPausedTurn {
		return a.leave(err)
	}
	return err
}

// emit emits an event of kind for the call.
func (a *acquisition) emit(kind EventKind, wait time.Duration, limit string, err error) {
	a.c.p.emit(Event{Kind: kind, Tokens: a.c.r.Tokens, Priority: a.c.r.Priority, Wait: wait, Limit: limit, Err: err})
}

// claimed returns the pending lease, which claimed its slot at its turn.
func (a *acquisition) claimed(rep wire.AcquireReply) *Lease {
	ad := a.under.admitAs(a.id)
	ad.Start, ad.Expiry = a.pending.a.Start, rep.Expiry
	ad.ChargedUs, ad.Waited, ad.TurnMs = a.charged, time.Since(a.began), a.turnMs
	l := a.under.open(ad)
	a.emit(Admitted, time.Since(a.began), limitOfReason(rep.Reason), nil)
	return l
}

// queued waits, queued for a slot, until a freed slot admits the call, or
// for the fallback timer; the next answer is the admission it was handed,
// if any.
func (a *acquisition) queued(ctx context.Context, an answer) {
	a.ticket, a.denied = an.rep.Ticket, &an.rep
	if a.pending == nil {
		a.under = an.c // the request kept with its queue entry
	}
	outcome, err := a.c.p.waitGrant(ctx, a.id, a.c.r, an.rep, a.deadline)
	if err != nil {
		return // the loop's top says which error
	}
	if rep := a.handed(outcome); rep != nil {
		// The slot was freed, and the call admitted, after the reply
		// that queued it was made.
		a.next = &answer{rep: *rep, c: a.under, charged: rep.NowUs, asked: an.asked}
	}
}

// deniedFor waits out a denial, or returns the error that ends the call:
// an ErrWaitTimeout *RefusedError for a wait past the bound.
func (a *acquisition) deniedFor(ctx context.Context, an answer) error {
	rep := an.rep
	if a.ticket == 0 && a.pending == nil && a.away != nil {
		// Nothing held here: another deployment may have room.
		return a.leave(nil)
	}
	if rep.Wait > an.remain {
		a.abandon()
		err := a.tooLong(rep.Wait, limitOfReason(rep.Reason))
		a.emit(Denied, rep.Wait, limitOfReason(rep.Reason), err)
		return err
	}
	a.denied = &rep
	_ = a.c.p.sleep(ctx, a.c.r, rep, a.deadline) // ctx's error: the loop's top says which
	return nil
}

// reserved handles a pending admission: it keeps the lease, sleeps until
// its turn (see untilTurn), and sets the ticket that claims its slot. It
// returns ctx's error, the lease given back.
func (a *acquisition) reserved(ctx context.Context, an answer) error {
	rep := an.rep
	if a.pending == nil {
		a.charged, a.turnMs, a.under = an.charged, rep.TurnMs(), an.c
		ad := an.c.admitAs(a.id)
		ad.Start, ad.Expiry = rep.Now.Add(rep.Wait), rep.Expiry
		ad.ChargedUs, ad.Waited, ad.TurnMs, ad.Quiet = an.charged, time.Since(a.began)+rep.Wait, rep.TurnMs(), true
		a.pending = an.c.open(ad)
		a.emit(Waiting, rep.Wait, limitOfReason(rep.Reason), nil)
	}
	a.ticket = rep.Ticket
	err := a.untilTurn(ctx, a.pending, rep.Wait, an.asked)
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
		a.c.p.giveBack(a.pending)
		a.pending = nil
	case a.ticket != 0:
		// Its ticket is the µs of its first denial: a lower bound of when
		// a freed slot can have charged it.
		c := a.under
		if c == nil {
			c = a.c.now()
		}
		c.leave(a.id, a.ticket, a.deadline)
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
// A call a Group routed here is not held past its turn by a pause (see
// untilTurn).
func (a *acquisition) admit(ctx context.Context, an answer) (*Lease, error) {
	rep := an.rep
	ad := an.c.admitAs(a.id)
	ad.Start, ad.Expiry = rep.Now.Add(rep.Wait), rep.Expiry
	ad.ChargedUs, ad.Waited, ad.Probe, ad.TurnMs = an.charged, time.Since(a.began)+rep.Wait, rep.Reason == reasonProbe, rep.TurnMs()
	ad.Quiet = rep.Wait > 0
	l := an.c.open(ad)
	if rep.Reason == reasonProbe {
		rep.Reason = ""
	}
	if rep.Wait > 0 {
		a.emit(Waiting, rep.Wait, limitOfReason(rep.Reason), nil)
	}
	if err := a.untilTurn(ctx, l, rep.Wait, an.asked); err != nil {
		return nil, err
	}
	l.announce()
	a.emit(Admitted, time.Since(a.began), limitOfReason(rep.Reason), nil)
	return l, nil
}

// errPausedTurn is untilTurn's answer to a call a Group routed here whose
// turn a pause would hold back: its turn is given back, and its Group
// routes it again rather than wait the pause out while another deployment
// has room.
var errPausedTurn = errors.New("pacer: the turn was paused")

// untilTurn sleeps until l's turn, wait from now. A pause this process set
// since the call asked for the turn (at asked; a 429 seen by a neighbour)
// holds the turn back until the pause ends, if it ends after the turn: the
// call keeps its turn, and the pause costs it at most the pause. (It used
// to give the turn back and queue again, behind every turn reserved
// meanwhile: with callers queued a few windows deep, each going back in
// turn, one 429 cost several windows; see docs/storm.md.) Other
// processes' turns go at their time, as the scripts let a reserved turn
// through a pause. A ctx canceled during the sleep returns ctx's error at
// once, the turn given back in the background.
//
// A pause may last longer than the lease: the lease is kept alive through
// it (renewed as Lease.KeepAlive does), so the call still holds its lease, and its
// slot, when it starts.
//
// A call a Group routed here (see acquisition.away) does not wait a pause
// out: its turn given back, untilTurn returns errPausedTurn, and its Group
// routes it again, past the paused deployment.
//
// A stop this process set or met since the call began (the turn was
// reserved after it) makes it ask once more at the turn.
func (a *acquisition) untilTurn(ctx context.Context, l *Lease, wait time.Duration, asked time.Time) error {
	p := a.c.p
	// Not the time the reply was read: a pause set between the script and
	// this line (a goroutine descheduled on a loaded machine) would be
	// missed. One set before the script ran is already in its turn, and
	// holds nothing more.
	reserved := asked
	turn := time.Now().Add(wait)
	alive := true // the lease may still be kept alive (see below)
	for {
		until, keep := turn, false
		if wait > 0 && p.pausedAt.Load() > reserved.UnixNano() {
			if paused := time.Unix(0, p.pausedUntil.Load()); paused.After(until) {
				if a.away != nil {
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
			if left := time.Until(l.Info().Expiry) * 2 / 3; d > left {
				d, keep = max(left, 10*time.Millisecond), true
			}
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			if keep && l.renew(ctx) != nil {
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
	if wait > 0 && p.stoppedAt.Load() > a.began.UnixNano() {
		// A stop came after the turn was reserved: a pending lease's claim
		// would be refused, and this turn must be too. One read, on this
		// rare path, says whether the stop still holds.
		if s, err := p.Snapshot(ctx); err == nil && s.Stopped > 0 {
			p.giveBack(l)
			return &RefusedError{why: ErrStopped, quota: s.StoppedBy == ErrQuotaExhausted, wait: s.Stopped}
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
// call that still finds no room then gets its ErrWaitTimeout before the bound,
// not ctx's error after it.
func (p *Pacer) sleep(ctx context.Context, r Request, rep wire.AcquireReply, deadline time.Time) error {
	p.emit(Event{Kind: Waiting, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: limitOfReason(rep.Reason)})
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
