package lua_test

import (
	"context"
	"testing"

	"github.com/llmpacer/llmpacer/pacer"
)

// defineCase is one run of the stored definition (define.lua): a Pacer
// storing its versioned Config's at its first call, following one stored
// by another process, or storing one with Define.
type defineCase struct {
	Name   string `json:"name"`
	Config string `json:"config"` // the Pacer's Config, by name
	// Version is the Pacer's Config.Version.
	Version int64 `json:"version,omitempty"`
	// Define, if set, is the Config Pacer.Define is called with (its
	// Version as Define.Version), before Request.
	Define *vconfig `json:"define,omitempty"`
	// Request, if set, is acquired (after Define).
	Request *vrequest `json:"request,omitempty"`
	// Replies answer the calls in order.
	Replies []any `json:"replies"`
	// Calls are the script calls made, their arguments as Redis gets them.
	Calls []wireCall `json:"calls"`
	Error string     `json:"error,omitempty"`
}

// storedDef is a definition as another process stored it: tenants with a
// share and an hourly token cap, a strict sliding spend cap, a weight and
// prices, under headroom.
const storedDef = `{"limits":{"RPM":100,"TPM":50000,"RPD":0,"TPD":0,"Concurrency":4},"burst":{"RPM":20,"TPM":0,"RPD":0,"TPD":0},` +
	`"rates":[{"Unit":5,"Limit":1000000,"Window":3600000000000,"Burst":0,"Sliding":true}],` +
	`"tenants":{"Rates":[{"Unit":2,"Limit":20000,"Window":3600000000000,"Burst":0,"Sliding":false}],"Share":0.25},` +
	`"weights":{"gpt-4o":2},"prices":{"":{"Input":1000000,"CachedInput":0,"Output":3000000,"InputMargin":0}},"headroom":0.1,"lease_ttl":90000000000}`

func defineVectors(t *testing.T) any {
	n := nowUs
	stale := []any{int64(3), int64(0), n, "", int64(0), int64(0), int64(0)}
	acme := tenant(calling(split("acquire", 0, 1000, 500, "interactive"), "gpt-4o"), "acme")
	plain := calling(req("acquire", 1300, "interactive"), "gpt-4o")
	odd := vconfig{Limits: vlimits{TPM: 90_000, Concurrency: 3}, Headroom: 0.05, BatchFloor: -1, LeaseTTLMs: 90_000,
		Rates:   []vrate{{Unit: "spend", Limit: 5_000_000, WindowMs: 86_400_000, Sliding: true}, {Unit: "output_tokens", Limit: 20_000, WindowMs: 60_000, Burst: 5_000}},
		Weights: map[string]float64{"gpt-4o-mini": 0.15, "o1": 7.5, "a<b&c": 1e-7},
		Prices: map[string]vprice{"gpt-4o-mini": {Input: 150_000, CachedInput: 75_000, Output: 600_000},
			"claude": {Input: 3e6, Output: 1.5e7, InputMargin: -1}, "": {Input: 9.5e11, CachedInput: 1e-7, Output: 0.000001}},
		Tenants: &vtenants{Share: 0.125}}
	spend := configByName(t, "tenants-spend")
	spend.Budget, spend.Version = "", 0
	cases := []defineCase{
		{Name: "a versioned Config stores its definition at the first call", Config: "tenants-spend", Version: 3, Request: &acme,
			Replies: []any{[]any{int64(1), int64(3), ""}, admitted(defaultLeaseTTL)}},
		{Name: "its version is stored already", Config: "tenants-spend", Version: 3, Request: &acme,
			Replies: []any{[]any{int64(0), int64(3), "{}"}, admitted(defaultLeaseTTL)}},
		{Name: "a newer one is stored: it is followed", Config: "basic", Version: 2, Request: &plain,
			Replies: []any{[]any{int64(0), int64(5), storedDef}, admitted(defaultLeaseTTL)}},
		{Name: "acquire says it changed: the call follows it and asks again", Config: "basic", Request: &plain,
			Replies: []any{stale, []any{int64(0), int64(4), storedDef}, admitted(defaultLeaseTTL)}},
		{Name: "a tenant's call on the definition followed", Config: "basic", Version: 2, Request: &acme,
			Replies: []any{[]any{int64(0), int64(5), storedDef}, admitted(defaultLeaseTTL)}},
		{Name: "an invalid definition stored", Config: "basic", Request: &plain,
			Replies: []any{stale, []any{int64(0), int64(6), `{"limits":{"RPM":-5}}`}}},
		{Name: "a definition an older version stored with sliding_window: refused", Config: "basic", Request: &plain,
			Replies: []any{stale, []any{int64(0), int64(6), `{"limits":{"RPM":60,"TPM":0,"RPD":0,"TPD":0,"Concurrency":0},"burst":{"RPM":0,"TPM":0,"RPD":0,"TPD":0},"tenants":{"Rates":null,"Share":0},"sliding_window":true}`}}},
		{Name: "a definition that is not JSON", Config: "basic", Version: 1, Request: &plain,
			Replies: []any{[]any{int64(0), int64(6), `limits: 5`}}},
		{Name: "Define stores the next version; the Pacer runs it", Config: "basic", Define: &spend, Request: &acme,
			Replies: []any{[]any{int64(1), int64(7), ""}, admitted(defaultLeaseTTL)}},
		{Name: "Define with a version: every field's encoding", Config: "basic", Define: func() *vconfig { c := odd; c.Version = 12; return &c }(),
			Replies: []any{[]any{int64(1), int64(12), ""}}},
		{Name: "Define with a version older than the one stored", Config: "basic", Define: func() *vconfig { c := spend; c.Version = 2; return &c }(),
			Replies: []any{[]any{int64(0), int64(9), storedDef}}},
	}
	for i := range cases {
		c := &cases[i]
		cfg := configByName(t, c.Config)
		cfg.Version = c.Version
		inBubble(t, cfg.config(), func(p *pacer.Pacer, f *fakeWire) {
			f.queue(c.Replies...)
			var err error
			if c.Define != nil {
				_, err = p.Define(context.Background(), c.Define.config())
			}
			if err == nil && c.Request != nil {
				_, err = c.Request.call(p)
			}
			c.Error = errName(err)
			c.Calls = append([]wireCall{}, f.take()...)
		})
	}
	return map[string]any{
		"comment": "The stored definition (define.lua; KEYS[4] is the definition hash). A Config with a version sends define {version, definition} " +
			"before its first call, and runs what is stored if another version is; acquire's code 3 makes it read {0, \"\"} and follow what is stored, then ask again. " +
			"Define sends {\"next\" or its version, definition}. The definition is Go's encoding/json of " +
			"{limits, burst, rates, tenants, weights, prices, sliding_window, headroom, no_refund, batch_floor, lease_ttl} (durations in ns, maps sorted, " +
			"floats in their shortest form): a port sends the same bytes. replies answer calls in order; error: what the call returned.",
		"cases": cases,
	}
}
