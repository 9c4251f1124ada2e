package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/retry"
	"github.com/redis/go-redis/v9"
)

// outagePlan is the redis-down scenario's outage: Redis goes away at, in
// the simulated world, and comes back after lasting; the workers are
// spread over pods processes, each with its own Pacer and client.
type outagePlan struct {
	pods        int
	at, lasting time.Duration
}

// outageKind is what a redis-down row does while Redis is down.
type outageKind int

const (
	outageNone   outageKind = iota
	outageClosed            // Config.Outage zero: every call refused
	outageShare             // the token limit fails open at limit / pods per pod
	outageWhole             // fails open at the whole limit in every pod (LiteLLM #35533)
)

// buildRedisDown makes 90 uniform jobs and an outage from a fifth of the
// way through the run (at the provider's pace) lasting a third of it.
func buildRedisDown(pl *plan, _ *rand.Rand) {
	p := pl.p
	pl.jobs = uniformJobs(p, p.jobs)
	pace := time.Duration(float64(int64(p.jobs)*p.tokens-p.providerTokens) / float64(p.providerTokens) * float64(p.window))
	pl.outage = &outagePlan{pods: 3, at: pace / 5, lasting: pace / 3}
}

// outageVariants are the redis-down rows: the budget failing closed, open
// at each pod's share, and open at the whole limit in each pod.
func (pl *plan) outageVariants(burst int64) []variant {
	n := pl.outage.pods
	row := func(label string, k outageKind) variant {
		return variant{label: label, shared: true, burst: burst, noRefund: !pl.p.providerRefund, outage: k}
	}
	return []variant{
		row("fail closed", outageClosed),
		row(fmt.Sprintf("fail open, Replicas %d", n), outageShare),
		row(fmt.Sprintf("fail open at the whole limit in each of %d pods", n), outageWhole),
	}
}

// outageResult is what a redis-down row measured.
type outageResult struct {
	Pods        int     `json:"pods"`
	DownSeconds float64 `json:"down_seconds"` // from closing Redis to its restart
	// Admitted while down: calls the pods' own shares let through, and
	// their tokens (prompt + max_tokens); LocalBound is what the shares
	// allow while the pods admit on their own: their refill, from empty,
	// from Redis's close until the last pod found it again.
	Admitted       int64   `json:"admitted_while_down"`
	AdmittedTokens int64   `json:"admitted_tokens_while_down"`
	LocalBound     int64   `json:"local_bound_tokens"`
	Refused        int64   `json:"refused_while_down"` // Acquires refused with ErrUnavailable
	BackSeconds    float64 `json:"back_seconds"`       // from Redis answering to the last pod's Redis event without Err
}

// outageRig runs a redis-down row: the pods' Pacers, and the outage.
type outageRig struct {
	mini          *miniredis.Miniredis
	pods          []*pacer.Pacer
	retries       int
	c             *chatClient
	at, lasting   time.Duration // wall time
	rate          float64       // tokens a second the pods' shares refill, together
	admitted, tok atomic.Int64
	refused       atomic.Int64

	mu           sync.Mutex
	lastUp       time.Time
	downAt, upAt time.Time
	done         chan struct{}
}

// newOutageRig makes one Pacer per pod on its own client, with cfg and the
// row's Config.Outage.
func newOutageRig(pl *plan, v variant, be *backend, cfg pacer.Config, c *chatClient) (*outageRig, error) {
	if be.mini == nil {
		return nil, errors.New("scenario redis-down closes and restarts Redis: run it on the in-process miniredis (no -redis or -cluster)")
	}
	o := pl.outage
	r := &outageRig{mini: be.mini, retries: pl.p.retries, c: c, at: pl.p.wall(o.at), lasting: pl.p.wall(o.lasting), done: make(chan struct{})}
	switch v.outage {
	case outageShare:
		cfg.Outage = pacer.Outage{FailOpen: []string{"tpm"}, Replicas: o.pods}
	case outageWhole:
		cfg.Outage = pacer.Outage{FailOpen: []string{"tpm"}, Share: 1}
	default:
		cfg.Outage = pacer.Outage{FailFast: true}
	}
	cfg.Observe = r.observe
	for range o.pods {
		// Fewer of go-redis's own retries than its defaults (3 commands
		// of 5 dials, about 1.5 s against a refused port): the first call
		// to meet the outage trips the circuit within a few milliseconds.
		rdb := redis.NewClient(&redis.Options{Addr: be.mini.Addr(), PoolSize: 64, MaxRetries: 1, DialerRetries: 1})
		rdb.AddHook(countHook{be.cmds, be.keys})
		p, err := pacer.New(rdb, cfg)
		if err != nil {
			return nil, err
		}
		r.pods = append(r.pods, p)
	}
	if v.outage != outageClosed {
		// Each pod's share refills from empty while it admits on its own:
		// together at the limit's rate, a share each, or each at the
		// whole rate.
		tpm := bucketOf(cfg, pacer.Tokens)
		r.rate = float64(tpm.Limit) / tpm.Window.Seconds()
		if v.outage == outageWhole {
			r.rate *= float64(o.pods)
		}
	}
	return r, nil
}

func (r *outageRig) observe(e pacer.Event) {
	switch {
	case e.Kind == pacer.Admitted && e.Local:
		r.admitted.Add(1)
		r.tok.Add(e.Tokens)
	case e.Kind == pacer.Redis && e.Err == nil: // Redis found again
		r.mu.Lock()
		r.lastUp = time.Now()
		r.mu.Unlock()
	}
}

// begin closes Redis at the outage's start and restarts it at its end.
func (r *outageRig) begin(ctx context.Context, start time.Time) {
	go func() {
		defer close(r.done)
		if sleepCtx(ctx, time.Until(start.Add(r.at))) != nil {
			return
		}
		r.mu.Lock()
		r.downAt = time.Now()
		r.mu.Unlock()
		r.mini.Close()
		_ = sleepCtx(ctx, r.lasting)
		if err := r.mini.Restart(); err != nil {
			panic(fmt.Sprintf("restarting miniredis: %v", err)) // its port was taken meanwhile
		}
		r.mu.Lock()
		r.upAt = time.Now()
		r.mu.Unlock()
	}()
}

// job runs a job through retry.Run on worker w's pod. A call refused
// because Redis is down and the budget fails closed is asked again every
// 50 ms, as a caller that must eventually make the call would.
func (r *outageRig) job(ctx context.Context, w int, j job) jobResult {
	p := r.pods[w%len(r.pods)]
	res := jobResult{priority: j.priority, ran: true, start: time.Now()}
	call := func(ctx context.Context) (usage, error) {
		t := time.Now()
		u, err := r.c.chat(ctx, j, false)
		res.inCalls += time.Since(t)
		res.attempts++
		return u, err
	}
	for {
		_, res.err = retry.Run(ctx, p, pacer.Request{Tokens: j.charge(), Priority: j.priority}, call,
			func(u usage) int64 { return u.total() }, retry.WithRetries(r.retries))
		if !errors.Is(res.err, pacer.ErrUnavailable) {
			break
		}
		r.refused.Add(1)
		if sleepCtx(ctx, 50*time.Millisecond) != nil {
			break
		}
	}
	res.end = time.Now()
	return res
}

// end waits for the outage to be over and the pods back on the shared
// budget (at most 5 s), and returns what the row measured.
func (r *outageRig) end() *outageResult {
	<-r.done
	deadline := time.Now().Add(5 * time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.lastUp.Before(r.upAt) && time.Now().Before(deadline) {
		r.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		r.mu.Lock()
	}
	res := &outageResult{Pods: len(r.pods), DownSeconds: r.upAt.Sub(r.downAt).Seconds(),
		Admitted: r.admitted.Load(), AdmittedTokens: r.tok.Load(), Refused: r.refused.Load()}
	// A pod admits on its own until its circuit finds Redis again, after
	// the restart (later on a loaded machine): its share refills as long.
	local := r.upAt.Sub(r.downAt)
	if r.lastUp.After(r.upAt) {
		res.BackSeconds = r.lastUp.Sub(r.upAt).Seconds()
		local = r.lastUp.Sub(r.downAt)
	}
	res.LocalBound = int64(r.rate * local.Seconds())
	return res
}
