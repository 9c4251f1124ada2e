// Package model is a pure-Go reference model of one llmpacer budget: the
// test oracle that lua/model_test.go runs the Redis scripts against.
//
// A Budget holds exactly what the scripts keep in Redis (bucket levels in
// thousandths, rounded down as the state hash stores them; the last refill
// time ts; the pause; the leases and their expiries, 0 once ended; qc and
// qb), and
// its methods Acquire, Settle, KeepAlive, Pause and Snapshot follow
// acquire.lua, settle.lua, keepalive.lua, pause.lua and snapshot.lua step by
// step. The model reads no clock: every method takes now, the millisecond the
// script would have read from TIME, so a Budget is a pure function of the
// calls made on it and the times they were made at.
//
// The arithmetic is the scripts' own: float64 where Lua computes with its
// doubles, math.Ceil and math.Floor where the Lua calls them, and integer
// thousandths wherever the scripts store a level. A product that the Lua
// adds to something is converted to float64 before the addition, which keeps
// the Go compiler from fusing the two into one multiply-add on the
// architectures that have it; fused, the model would round differently from
// Lua and disagree in the last bit.
//
// Modelled but easy to miss: removing ended and expired leases (reaping). An
// admission landing on a millisecond divisible by 16 removes up to 100 of
// them, ended ones (score 0) first, then by expiry. Reaping never changes
// what counts as in flight, since such a lease holds no slot, but it does
// change the answer to a retried lease id: a lease still in the set, ended
// or not, answers code 2, and a reaped one is admitted anew. And refunds:
// settle adds them to the stored levels without refilling (HINCRBY), so the
// stored level may exceed capacity, which reads as full.
//
// Out of scope: key expiry. The scripts put TTLs on both keys (recorded in
// the hash field xp), and the model never forgets. On a real Redis that
// matters in one case only: both keys expire a second or more after every
// bucket is full and every lease has expired, after which a retried id is
// admitted anew instead of answered with code 2. Tests keep keys alive
// (miniredis expires keys only when told to) or finish well within a second
// of idleness.
package model
