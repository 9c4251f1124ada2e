// Package model is a pure-Go reference model of one llmpacer budget: the
// test oracle that lua/model_test.go runs the Redis scripts against.
//
// A Budget holds exactly what the scripts keep in Redis (each bucket's TAT
// in µs and its give-back stack; the pause; qb; the lease set with its
// leases, pending leases and grants; the slot queue), and its methods
// Acquire, Settle, KeepAlive, Pause, Throttle and Snapshot follow
// acquire.lua, settle.lua, keepalive.lua, pause.lua and snapshot.lua step by
// step; it also records what the scripts publish (Published). The model
// reads no clock: every method takes the time the script would have
// read from TIME (µs, or ms for the scripts that only need ms), so a Budget
// is a pure function of the calls made on it and the times they were made
// at.
//
// The scripts add and compare integers (TATs and charges in µs), which the
// model does in int64; where the Lua divides (a wait in ms, a queue's
// spacing) the model computes with float64 as Lua does, and rounds with
// math.Ceil where the Lua calls ceil. Charges, Slots and Deltas compute what
// a caller sends, as packages pacer and lease do.
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
// prelude.lua), which no count includes. The scripts put TTLs on both keys
// (recorded in the hash field xp), and the model never forgets. On a real
// Redis that matters in one case only: both keys expire a second or more
// after every bucket is full and every lease has expired, after which a
// retried id is admitted anew instead of answered with code 2. Tests keep
// keys alive (miniredis expires keys only when told to) or finish well
// within a second of idleness.
package model
