package pacer

import "time"

// SplitGroup makes g try its deployments one script call each, as it does
// when their budgets share no slot: the tests run both paths on one server.
func SplitGroup(g *Group) { g.one = false }

// OneTrip says whether g routes in one script call.
func OneTrip(g *Group) bool { return g.one }

// NotYet returns the error TryAcquire returns when limit has no room for
// wait, for tests of what reads it.
func NotYet(wait time.Duration, limit Limit) error { return notYet(wait, limit) }
