package pacerhttp

import (
	"context"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
)

// syncer hands the provider's rate-limit headers to pacer.Sync off the
// caller's path: at most one Sync runs at a time per transport, and
// headers that arrive meanwhile replace each other, so a burst of answers
// costs one Redis call for the latest, not one each.
type syncer struct {
	p       *pacer.Pacer
	mu      sync.Mutex
	next    *classify.RateLimits
	running bool
}

// push queues rl if it reports any room.
func (s *syncer) push(rl classify.RateLimits) {
	if !rl.Requests.HasRemaining && !rl.Tokens.HasRemaining {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = &rl
	if !s.running {
		s.running = true
		go s.run()
	}
}

func (s *syncer) run() {
	for {
		s.mu.Lock()
		rl := s.next
		s.next = nil
		if rl == nil {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.p.Sync(ctx, *rl) // a failure waits for the next answer
		cancel()
	}
}
