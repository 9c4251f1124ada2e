package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// budget is the budget of one provider key and model, in this proxy.
type budget struct {
	name string
	p    *pacer.Pacer
	rt   http.RoundTripper // pacerhttp's transport on p, sending through learner
	log  *slog.Logger
	// learned says the budget's limits are stored in Redis: learned from
	// headers by some replica, or defined by an operator.
	learned  atomic.Bool
	learning sync.Mutex
	tenants  pacer.Tenants // kept in a learned definition
	// inFlight counts the calls using the budget, lastUse (Unix
	// nanoseconds) when one last began or ended: a budget may be evicted
	// only with none in flight, the least recently used first.
	inFlight, lastUse atomic.Int64
}

// done ends a call that budget returned b for.
func (b *budget) done() {
	b.lastUse.Store(time.Now().UnixNano())
	b.inFlight.Add(-1)
}

// KeyDigest names a provider key in budget names, logs and metrics: the
// first 16 hex digits of its SHA-256. The key itself is never stored or
// logged; an operator finds a key's budget with
// printf %s "$KEY" | sha256sum | cut -c1-16.
func KeyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// BudgetName is the name of the budget of a provider ("openai",
// "anthropic"), key and model: "openai:<KeyDigest(key)>:gpt-4o-mini".
func BudgetName(provider, key, model string) string {
	return provider + ":" + KeyDigest(key) + ":" + model
}

// errTooManyBudgets reports that the proxy holds Config.MaxBudgets budgets.
var errTooManyBudgets = errors.New("llmpacer proxy: too many budgets")

// budget returns the budget of provider, key and model, made on first use,
// for one call: the caller calls its done when the call has ended.
func (p *Proxy) budget(provider, key, model string) (*budget, error) {
	name := BudgetName(provider, key, model)
	p.budgets.mu.Lock()
	defer p.budgets.mu.Unlock()
	b, ok := p.budgets.m[name]
	if !ok {
		var err error
		if b, err = p.newBudget(provider, key, model); err != nil {
			return nil, err
		}
	}
	b.inFlight.Add(1)
	b.lastUse.Store(time.Now().UnixNano())
	return b, nil
}

// newBudget makes the budget of provider, key and model, evicting the
// least recently used idle budget when MaxBudgets are held. Its caller
// holds p.budgets.mu.
func (p *Proxy) newBudget(provider, key, model string) (*budget, error) {
	name := BudgetName(provider, key, model)
	if len(p.budgets.m) >= p.cfg.MaxBudgets && !p.evictIdle() {
		return nil, fmt.Errorf("%w: this proxy paces %d keys and models already (-max-budgets), each used within %v (-budget-idle)",
			errTooManyBudgets, p.cfg.MaxBudgets, p.cfg.BudgetIdle)
	}
	cfg, configured := p.budgetConfig(provider, key, model)
	pc, err := pacer.New(p.cfg.Redis, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: the model %.80q cannot name a budget: %v", errBadModel, model, err)
	}
	b := &budget{name: name, p: pc, log: p.log, tenants: cfg.Tenants}
	b.learned.Store(configured) // the file's limits are never replaced by headers
	b.rt = pacerhttp.NewTransport(pc, learner{b: b, base: p.up}, pacerhttp.WithMaxBody(p.cfg.MaxBody))
	p.budgets.m[name] = b
	p.metrics.Watch(pc)
	return b, nil
}

// evictIdle drops the least recently used budget that has no call in
// flight and has been idle for BudgetIdle, and reports whether it found
// one. Its state stays in Redis: a later call makes the budget again and
// follows its stored definition. Its caller holds p.budgets.mu.
func (p *Proxy) evictIdle() bool {
	cutoff := time.Now().Add(-p.cfg.BudgetIdle).UnixNano()
	var oldest *budget
	for _, b := range p.budgets.m {
		if last := b.lastUse.Load(); b.inFlight.Load() == 0 && last <= cutoff && (oldest == nil || last < oldest.lastUse.Load()) {
			oldest = b
		}
	}
	if oldest == nil {
		return false
	}
	delete(p.budgets.m, oldest.name)
	p.metrics.Unwatch(oldest.p)
	p.log.Info("budget evicted, idle, to make room for another (-max-budgets)", "budget", oldest.name,
		"idle", time.Since(time.Unix(0, oldest.lastUse.Load())).Round(time.Millisecond).String())
	return true
}

// budgetConfig returns the Config of the budget of provider, key and
// model, and whether the configuration file names its limits. Until the
// first answer teaches the limits of one it does not name, the budget
// admits one call at a time: the safe side for a key whose limits nobody
// has said.
func (p *Proxy) budgetConfig(provider, key, model string) (pacer.Config, bool) {
	cfg := pacer.Config{
		Name: BudgetName(provider, key, model), KeyPrefix: p.cfg.KeyPrefix, Limits: pacer.Limits{Concurrency: 1},
		MaxWait: p.cfg.MaxWait, Outage: pacer.Outage{FailFast: true}, Observe: observeBoth(p.metrics.Observe, pacer.SlogObserver(p.log)),
	}
	k, ok := p.held[provider+"\x00"+key]
	if !ok {
		return cfg, false
	}
	cfg.Tenants = k.tenants()
	l, ok := k.Models[model]
	if !ok {
		return cfg, false
	}
	cfg.Limits, cfg.Rates = l.limits()
	cfg.Version = p.cfg.File.Version
	return cfg, true
}

// hold takes in the keys of the configuration file, checking every
// budget it names.
func (p *Proxy) hold(f File) error {
	for _, k := range f.Keys {
		p.held[k.Provider+"\x00"+k.key] = k
		for _, c := range k.Clients {
			p.clients[c.key] = client{provider: k.Provider, key: k.key, tenant: c.Tenant}
		}
		for model := range k.Models {
			cfg, _ := p.budgetConfig(k.Provider, k.key, model)
			if _, err := pacer.New(p.cfg.Redis, cfg); err != nil {
				return fmt.Errorf("%w: the %s key of %s, model %q: %v", ErrInvalid, k.Provider, k.KeyEnv, model, err)
			}
		}
	}
	return nil
}

// errBadModel reports a model name no budget can have.
var errBadModel = errors.New("llmpacer proxy: bad model name")

// learner sends a budget's model calls upstream and learns the budget's
// limits from the first answer that states them.
type learner struct {
	b    *budget
	base http.RoundTripper
}

func (l learner) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err == nil && !l.b.learned.Load() {
		l.b.learn(req.Context(), resp.Header)
	}
	return resp, err
}

// learn stores the limits h states as the budget's definition, unless one
// is stored already (an operator's, or another replica's): the stored one
// wins. It runs before the answer goes back, so the budget's next call
// already follows the limits.
func (b *budget) learn(ctx context.Context, h http.Header) {
	b.learning.Lock()
	defer b.learning.Unlock()
	if b.learned.Load() {
		return
	}
	if b.p.Config().Version > 0 {
		b.learned.Store(true)
		return
	}
	rl := classify.ParseHeaders(h, time.Now())
	cfg, ok := definitionOf(rl)
	if !ok {
		return // no headers: a later answer may have them
	}
	// Version 1 is stored only if no definition is: never over one.
	cfg.Version, cfg.Tenants = 1, b.tenants
	_, err := b.p.Define(ctx, cfg)
	switch {
	case err == nil:
		b.log.Info("budget limits learned from the provider's headers", "budget", b.name, "limits", fmt.Sprintf("%+v", cfg.Limits), "rates", len(cfg.Rates))
		// The room this first answer reports, before the next call.
		_ = b.p.Sync(ctx, rl)
	case errors.Is(err, pacer.ErrSuperseded):
		// Stored first by another replica or an operator: followed from
		// the next call.
	default:
		b.log.Warn("budget limits not stored; the next answer tries again", "budget", b.name, "err", err.Error())
		return
	}
	b.learned.Store(true)
}

// definitionOf turns the limits a provider's headers state into a
// budget's definition. Anthropic's tokens-limit is the most restrictive of
// its input and output limits: where those are stated it is left out, as
// a combined token rate charged input plus output would be far too strict.
func definitionOf(rl classify.RateLimits) (pacer.Config, bool) {
	var c pacer.Config
	if w := rl.Requests; w.HasLimit && w.Limit > 0 {
		c.Limits.RPM = w.Limit
	}
	split := false
	for _, r := range []struct {
		w    classify.Window
		unit pacer.Unit
	}{{rl.InputTokens, pacer.InputTokens}, {rl.OutputTokens, pacer.OutputTokens}} {
		if r.w.HasLimit && r.w.Limit > 0 {
			c.Rates = append(c.Rates, pacer.Rate{Unit: r.unit, Limit: r.w.Limit, Window: time.Minute})
			split = true
		}
	}
	if w := rl.Tokens; !split && w.HasLimit && w.Limit > 0 {
		c.Limits.TPM = w.Limit
	}
	return c, c.Limits != (pacer.Limits{}) || len(c.Rates) > 0
}

// observeBoth is the observer that calls metrics then log.
func observeBoth(metrics, log func(pacer.Event)) func(pacer.Event) {
	return func(e pacer.Event) {
		metrics(e)
		log(e)
	}
}
