package retry_test

import "github.com/llmpacer/llmpacer/internal/pacertest"

// The shared helpers of the black-box tests (internal/pacertest), by the
// short names the tests use.
var (
	newPacers     = pacertest.NewPacers
	newPacer      = pacertest.NewPacer
	snap          = pacertest.Snap
	near          = pacertest.Near
	stopClock     = pacertest.StopClock
	runningClock  = pacertest.RunningClock
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
