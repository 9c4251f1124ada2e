package pacer_test

import (
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/pacertest"
)

// The shared helpers of the black-box tests (internal/pacertest), by the
// short names the tests use.
var (
	newPacers     = pacertest.NewPacers
	newPacer      = pacertest.NewPacer
	snap          = pacertest.Snap
	near          = pacertest.Near
	stopClock     = pacertest.StopClock
	runningClock  = pacertest.RunningClock
	elapsed       = pacertest.Elapsed
	tryAcquire    = pacertest.TryAcquire
	retryAfter    = pacertest.RetryAfter
	startProvider = pacertest.StartProvider
)

type (
	refill     = pacertest.Refill
	chatClient = pacertest.ChatClient
	usage      = pacertest.Usage
)

const levelEps = pacertest.LevelEps

// Verdicts for Lease.Fail that tell the budget nothing: a 5xx ends the
// lease released (its reservation stays charged), a 400 rejected (its
// tokens back, its request counted).
var (
	serverError = classify.Verdict{Kind: classify.Transient, Status: 500}
	badRequest  = classify.Verdict{Kind: classify.Permanent, Status: 400}
)
