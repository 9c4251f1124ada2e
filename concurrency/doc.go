// Package concurrency holds the in-process side of llmpacer's concurrency
// slots. The slots themselves live in Redis (a sorted set of leases scored
// by expiry, see package lua), so a crashed worker's slot frees itself when
// its lease expires. This package adds what one process can do better on its
// own:
//
//   - Queue wakes the oldest local waiter the moment a lease of this process
//     ends, instead of leaving it asleep until the script's estimate of when a
//     slot frees somewhere in the fleet.
//   - KeepAlive renews a long call's lease in the background, so a call that
//     runs longer than the lease TTL keeps its slot.
package concurrency
