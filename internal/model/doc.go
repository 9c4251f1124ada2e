// Package model is a pure-Go reference model of one llmpacer budget: the
// test oracle that lua/model_test.go runs the Redis scripts against.
//
// A Budget holds exactly what the scripts keep in Redis: for each rate,
// by its field, a GCRA bucket's TAT in µs and its give-back stack, or a
// strict sliding window's counts per sub-window (sliding.go); the pause,
// qb and the stop (qs); the lease set with its leases and pending leases;
// the slot queue, with each waiter's request (w:<id>). Its methods
// Acquire, Settle, KeepAlive, Pause,
// Throttle, Stop and Snapshot follow acquire.lua, settle.lua,
// keepalive.lua, pause.lua, stop.lua and snapshot.lua step by step; it
// also records what the scripts publish (Published). The model reads no
// clock: every method takes the time the script would have read from TIME
// (µs, or ms for the scripts that only need ms), so a Budget is a pure
// function of the calls made on it and the times they were made at.
//
// Tenants (tenant.go): a call may name a tenant's hash, a second hash of
// the same kind as the state hash, whose own rates ('@' fields) are
// charged with the budget's, all or nothing, and whose shares ('%'
// fields, TATs without a stack) decide whether the call is over its share
// and then served as a batch call. The model keeps each tenant's hash,
// its qb and its xp (the expiry the scripts set on it: every field of a
// tenant's hash is compared, byte for byte). And the definition key
// (define.lua) with the state's copy of its version (dv): a caller that
// sends another version is answered code 3.
//
// A budget is a list of rates (Config): any unit (requests, tokens, input
// or output tokens, spend), any window, several on one unit, each a
// bucket or a sliding window, checked and charged together, all or
// nothing. What a caller sends them (charges, allowances, corrections,
// lowerings, prices) comes from package wire, as production computes it
// (see caller.go); what the scripts do with it is the model's own code,
// one copy for every rate: it reads a field's kind from its mark, as the
// scripts do.
//
// The scripts add and compare integers (TATs and charges in µs, sliding
// counts in units), which the model does in int64; where the Lua divides
// (a wait in ms, a queue's spacing) the model computes with float64 as Lua
// does, and rounds with math.Ceil where the Lua calls ceil. A sliding
// window's sub-window is an integer division, which the Lua does in
// doubles and floors: exact, since a quotient that is not whole lies at
// least 1/g from the next integer, far more than a double's rounding of
// a quotient below 2^47.
//
// Modelled but easy to miss: removing expired leases (reaping). An
// admission landing on a millisecond divisible by 16 removes up to 100 of
// them, oldest expiry first. Reaping never changes what counts as in
// flight, since an expired lease holds no slot, but it does change the
// answer to a retried lease id: a lease still in the set, expired or not,
// answers code 2, and a reaped one is admitted anew. And give-backs: each
// bucket keeps a stack of its charge events' headrooms (giveback.go), and
// a give-back moves a TAT back no further than the first event after the
// lease leaves room for, and never before now.
//
// Out of scope: key expiry, and the lease set's sentinel member (see
// prelude.lua), which no count includes. The scripts put TTLs on the keys
// (recorded in the hash field xp; the model computes a tenant's xp, not
// the state hash's), and the model never forgets. On a real
// Redis that matters in one case only: both keys expire a second or more
// after every bucket is full and every lease has expired, after which a
// retried id is admitted anew instead of answered with code 2, and a
// tenant's hash is gone. Tests keep keys alive: miniredis expires keys
// only when told to, and the real-Redis lane of lua's differential test
// takes their TTLs off after each step.
package model
