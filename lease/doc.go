// Package lease holds the Lease: one admitted call's claim on a shared
// budget, from admission until the call's real usage is known.
//
// A lease is born in Pacer.Acquire (package pacer), holding its reserved
// tokens, one request from each request limit and, where the budget limits
// concurrency, one slot. It ends exactly once, in one of four ways:
//
//   - Settle: the call finished and used n tokens. The unused part of the
//     reservation goes back at once; an overrun is charged as debt.
//   - Release: the call failed. The whole reservation stays charged, since
//     the provider may have counted the call anyway.
//   - Reject: the provider refused the call before doing any work (out of
//     quota, a 4xx). Its tokens go back; its request stays counted.
//   - Cancel: the call was never made. Everything goes back.
//
// Ending a lease twice, from any goroutine, changes the budget once. An end
// that fails because Redis is unreachable returns the error and is retried
// in the background until it lands or the lease expires, so that an outage
// does not keep slots taken for a lease TTL. A lease that is not ended
// expires after the budget's lease TTL: its slot comes back, and its tokens
// stay charged, as for Release. KeepAlive keeps a long call's lease from
// expiring.
package lease
