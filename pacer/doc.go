// Package pacer shares one LLM provider budget among every process of an
// application.
//
// A provider's limits (requests and tokens per minute, requests per day,
// calls in flight) belong to the API key, not to any one process. Give every
// process a Pacer with the same Config.Name and the same Redis, and they draw
// from one budget kept in Redis, checked and charged by one atomic Lua
// script on Redis's own clock. The fleet then runs at the provider's limit,
// not past it.
//
// A call reserves an estimate before it runs (prompt tokens plus max output
// tokens) and settles its real usage after:
//
//	l, err := p.Acquire(ctx, pacer.Request{Tokens: 1300})
//	if err != nil {
//		return err // ErrTooLarge, ErrWaitTimeout, ErrStopped, ErrUnavailable, ErrInvalid or ctx's error
//	}
//	reply, err := callModel(ctx)
//	if err != nil {
//		l.Fail(ctx, classify.FromError(err), err) // ends the lease, pauses every process on a 429
//		return err
//	}
//	return l.Settle(ctx, reply.Usage.TotalTokens) // refund the rest, or charge the overrun
//
// When the provider answers 429 anyway (a caller outside the pacer, an
// estimate too low), Fail holds back every process for the provider's
// retry delay and brings the tripped bucket back in line with the provider;
// on an exhausted quota it stops every process, probing for the quota's
// return.
// Package retry's Run does all of this around any call, with retries that
// tell a rate limit from an exhausted quota.
//
// When Redis is unreachable the budget fails closed: calls are refused
// with ErrUnavailable. Config.Outage lets limits that protect the
// provider's servers (requests, concurrency) fail open at each process's
// share instead; money never does.
//
// Elsewhere: retrying a call (package retry), token counting (package
// estimate), telling a rate limit from an exhausted quota (package
// classify), pacing an SDK at its HTTP transport (package pacerhttp), and
// Prometheus metrics (package pacerprom, fed by Config.Observe;
// SlogObserver logs the same events).
package pacer
