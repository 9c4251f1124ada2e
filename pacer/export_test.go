package pacer

import (
	"context"
	"time"

	"github.com/llmpacer/llmpacer/classify"
)

// SplitGroup makes g try its deployments one script call each, as it does
// when their budgets share no slot: the tests run both paths on one server.
func SplitGroup(g *Group) { g.one = false }

// OneTrip says whether g routes in one script call.
func OneTrip(g *Group) bool { return g.one }

// NotYet returns the error TryAcquire returns when limit has no room for
// wait, for tests of what reads it.
func NotYet(wait time.Duration, limit string) error { return notYet(wait, limit) }

// Renew pushes l's expiry once, as each tick of Lease.KeepAlive does.
func Renew(ctx context.Context, l *Lease) error { return l.renew(ctx) }

// TooLong returns Acquire's error for a wait past bound.
func TooLong(wait, bound time.Duration, limit string) error {
	return bounds{bound: bound, deadline: time.Now().Add(bound)}.tooLong(wait, limit)
}

// Keys returns p's Redis keys in the scripts' order (KEYS[1] to KEYS[4]),
// for tests that read or delete them.
func Keys(p *Pacer) []string { return append([]string(nil), p.keys...) }

// TenantKey returns the key of tenant's hash in p's budget.
func TenantKey(p *Pacer, tenant string) string { return p.tenantKey(tenant) }

// Throttle does to p what Lease.Fail does on a 429 of a call that would
// reserve r, for tests of the pause's arithmetic without a lease.
func Throttle(ctx context.Context, p *Pacer, d time.Duration, limit classify.Limit, r Request) error {
	if err := checkTokens("Throttle: ", r); err != nil {
		return err
	}
	return p.throttled(ctx, d, limit, p.callOf(p.s(), r).use)
}

// StopQuota does to p what Lease.Fail does on an exhausted quota, stopping
// it for d and probing every probe (0: Config.QuotaProbe), for tests of the
// stop without a lease.
func StopQuota(ctx context.Context, p *Pacer, d, probe time.Duration) error {
	if probe == 0 {
		probe = p.s().quotaProbe
	}
	return p.stop(ctx, d, probe, wireQuota)
}

// SettleCounts returns the settles p's leases sent by group commit, and
// the script calls that carried them (see batcher).
func SettleCounts(p *Pacer) (settles, calls int64) {
	return p.settles.calls.Load(), p.settles.sent.Load()
}

// AcquireCounts returns the acquires p sent by group commit, and the
// script calls that carried them.
func AcquireCounts(p *Pacer) (acquires, calls int64) {
	return p.acquires.calls.Load(), p.acquires.sent.Load()
}

// QueuedSettles returns how many settles wait for p's settle in flight.
func QueuedSettles(p *Pacer) int {
	p.settles.mu.Lock()
	defer p.settles.mu.Unlock()
	return len(p.settles.queue)
}

// SetGroupStall sets how long p's queued calls wait before each opens a
// lane of its own (see batcher), before p makes any call.
func SetGroupStall(p *Pacer, d time.Duration) {
	p.acquires.stall, p.settles.stall = d, d
}

// BatchesBy returns how p sent its latest batch: "FCALL", "EVALSHA", or
// "" before its first batch (see functions).
func BatchesBy(p *Pacer) string {
	switch p.acquires.fns.last.Load() {
	case byFCall:
		return "FCALL"
	case byEvalSha:
		return "EVALSHA"
	}
	return ""
}

// SameLibrary reports whether p and q share what they know of the
// function library (see library): Pacers on one client do.
func SameLibrary(p, q *Pacer) bool { return p.acquires.fns.lib == q.acquires.fns.lib }

// GrantsReady says whether p's slot-grant subscription is confirmed (see
// concurrency.Grants.Ready): a freed slot's message then reaches its
// waiter.
func GrantsReady(p *Pacer) bool { return p.grants.Ready() }
