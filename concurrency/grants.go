package concurrency

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Grants wakes the goroutines of this process that wait in a budget's slot
// queue. When a slot frees, the budget's scripts admit the queue's head
// with it and publish the waiter's id with what they did for it
// ('<id>:<outcome>'); Grants hands the waiter its outcome. It keeps one
// subscription for all local waiters, open while any waits and for a
// linger after the last one leaves: a steady stream of waiters keeps one
// connection, and an idle process keeps none (and no goroutine).
//
// When the subscription becomes ready, and again after it reconnects, the
// waiters admitted while nobody listened are looked up (check) and woken
// with an empty outcome (they ask the budget): they would otherwise be
// found only by their fallback timers.
//
// The zero value is not usable; a Grants is safe for simultaneous use by
// multiple goroutines.
type Grants struct {
	listen Listener
	check  Check
	linger time.Duration

	mu      sync.Mutex
	waiters map[string]chan string
	// recent are ids published while no local waiter had registered them,
	// with their outcomes: a waiter registers after its script call
	// returns, and its admission may arrive first. Kept for recentFor,
	// oldest first in order.
	recent map[string]published
	order  []string
	gen    int                // the listener's generation; 0 when none runs
	last   int                // the latest generation started
	up     int                // the generation whose subscription ready confirmed
	cancel context.CancelFunc // stops the listener
	idle   *time.Timer        // stops the listener after linger
}

// Listener subscribes to the budget's grants until ctx is done: it calls
// ready each time its subscription is confirmed (again after a reconnect),
// and deliver with each message: space-separated entries, each a waiter's
// id and, after a colon, its outcome.
type Listener func(ctx context.Context, ready func(), deliver func(msg string))

// Check returns those of ids that the budget admitted (or otherwise took
// out of its queue) while nobody listened. An error wakes every waiter:
// each asks the budget itself.
type Check func(ctx context.Context, ids []string) ([]string, error)

// published is an outcome that came before its waiter registered.
type published struct {
	at      time.Time
	outcome string
}

// recentFor is how long an outcome published before its waiter registered
// still reaches it. The waiter's fallback timer finds it later anyway.
const recentFor = 2 * time.Second

// NewGrants returns a Grants that runs listen while anyone waits, and for
// linger after the last waiter leaves, and that uses check when the
// subscription becomes ready (nil: every waiter then wakes).
func NewGrants(listen Listener, check Check, linger time.Duration) *Grants {
	return &Grants{listen: listen, check: check, linger: linger, waiters: map[string]chan string{}, recent: map[string]published{}}
}

// Wait registers the waiter id. The returned channel receives id's
// outcome once it is published (or was, a moment before), then is closed;
// an empty outcome (a waiter found after the subscription became ready,
// or an entry without one) means: ask the budget. leave must be called
// once the caller stops waiting, woken or not.
func (g *Grants) Wait(id string) (wake <-chan string, leave func()) {
	ch := make(chan string, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.idle != nil {
		g.idle.Stop()
		g.idle = nil
	}
	if g.gen == 0 {
		g.start()
	}
	if p, ok := g.recent[id]; ok && time.Since(p.at) < recentFor {
		delete(g.recent, id)
		ch <- p.outcome
		close(ch)
		return ch, func() {}
	}
	g.waiters[id] = ch
	return ch, func() { g.leave(id, ch) }
}

// Listening reports whether a listener runs.
func (g *Grants) Listening() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen != 0
}

// Ready reports whether the running listener's subscription was
// confirmed, and the waiters admitted before it woken: from then on an
// outcome published reaches its waiter by message (a connection lost
// since shows only when the listener confirms again).
func (g *Grants) Ready() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen != 0 && g.up == g.gen
}

func (g *Grants) leave(id string, ch chan string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waiters[id] == ch {
		delete(g.waiters, id)
	}
	if len(g.waiters) == 0 && g.gen != 0 && g.idle == nil {
		gen := g.gen
		g.idle = time.AfterFunc(g.linger, func() { g.stop(gen) })
	}
}

// start runs a new listener. g.mu is held.
func (g *Grants) start() {
	g.last++
	g.gen = g.last
	gen := g.gen
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.listen(ctx, func() { g.ready(gen) }, func(msg string) { g.deliver(gen, msg) })
}

// stop ends listener gen if nobody waits.
func (g *Grants) stop(gen int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen != gen || len(g.waiters) > 0 {
		return
	}
	g.idle = nil
	g.cancel()
	g.gen = 0
	clear(g.recent)
	g.order = nil
}

// ready wakes the waiters admitted before the subscription was confirmed,
// which check finds, with an empty outcome: each asks the budget.
func (g *Grants) ready(gen int) {
	g.mu.Lock()
	ids := make([]string, 0, len(g.waiters))
	for id := range g.waiters {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	if len(ids) == 0 {
		g.confirm(gen)
		return
	}
	granted := ids
	if g.check != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		found, err := g.check(ctx, ids)
		cancel()
		if err == nil {
			granted = found
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen != gen {
		return
	}
	for _, id := range granted {
		if ch, ok := g.waiters[id]; ok {
			ch <- ""
			close(ch)
			delete(g.waiters, id)
		}
	}
	g.up = gen
}

// confirm notes that listener gen's subscription is ready (see Ready).
func (g *Grants) confirm(gen int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen == gen {
		g.up = gen
	}
}

// deliver hands each waiter of msg its outcome, and remembers those of
// waiters nobody here waits for yet.
func (g *Grants) deliver(gen int, msg string) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen != gen {
		return
	}
	for _, e := range strings.Fields(msg) {
		id, outcome, _ := strings.Cut(e, ":")
		if ch, ok := g.waiters[id]; ok {
			ch <- outcome
			close(ch)
			delete(g.waiters, id)
			continue
		}
		g.recent[id] = published{now, outcome}
		g.order = append(g.order, id)
	}
	// Forget what is too old to matter, oldest first.
	n := 0
	for _, id := range g.order {
		if p, ok := g.recent[id]; ok && now.Sub(p.at) < recentFor {
			break
		}
		delete(g.recent, id)
		n++
	}
	g.order = g.order[n:]
}
