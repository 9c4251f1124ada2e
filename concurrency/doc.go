// Package concurrency holds the in-process side of llmpacer's concurrency
// slots. The slots themselves live in Redis (a sorted set of leases scored
// by expiry, and a queue of waiters, see package lua), so a crashed
// worker's slot frees itself when its lease expires, and waiters in every
// process get slots first come, first served. This package adds what one
// process does on its own:
//
//   - Grants wakes a local waiter as soon as a freed slot admits it,
//     from one subscription per budget, open only while someone waits.
//   - KeepAlive renews a long call's lease in the background, so a call that
//     runs longer than the lease TTL keeps its slot.
package concurrency
