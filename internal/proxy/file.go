package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// File is the proxy's optional configuration file (JSON): the provider
// keys the proxy holds, the proxy keys its clients present instead, each
// mapped to a tenant, and limits named per model. Keys are never written
// in the file: each is read from the environment variable it names.
//
//	{
//	  "version": 2,
//	  "keys": [{
//	    "provider": "openai", "key_env": "OPENAI_API_KEY",
//	    "share": 0.5, "tenant_limits": {"rpm": 100},
//	    "clients": [{"key_env": "TEAM_A_PROXY_KEY", "tenant": "team-a"}],
//	    "models": {"gpt-4o-mini": {"rpm": 500, "tpm": 200000}}
//	  }]
//	}
type File struct {
	// Version is the version the models' limits are stored as (see
	// pacer.Config.Version): 2 or more, above the learned definitions'
	// 1, so that a configured budget replaces a learned one. Raise it to
	// change limits across every replica. Default 2.
	Version int64 `json:"version"`
	Keys    []Key `json:"keys"`
}

// Key is one provider key the proxy holds.
type Key struct {
	// Provider is "openai", "anthropic", "azure" or "gemini": the route
	// the key is for.
	Provider string `json:"provider"`
	// KeyEnv names the environment variable holding the provider key.
	KeyEnv string `json:"key_env"`
	// Share and TenantLimits give this key's budgets tenants
	// (pacer.Config.Tenants): each client's tenant may use Share of the
	// budget before it yields, and never more than TenantLimits.
	Share        float64 `json:"share"`
	TenantLimits Limits  `json:"tenant_limits"`
	// Clients are the proxy keys that spend this key, each as a tenant.
	Clients []Client `json:"clients"`
	// Models name limits per model; a model not named learns its limits
	// from the provider's headers.
	Models map[string]Limits `json:"models"`

	key string // read from KeyEnv
}

// Client is a proxy key: a client presents it in place of the provider
// key, which the proxy puts in its place.
type Client struct {
	KeyEnv string `json:"key_env"`
	Tenant string `json:"tenant"`

	key string
}

// Limits are limits per minute (and per day), and calls in flight.
type Limits struct {
	RPM         int64 `json:"rpm"`
	TPM         int64 `json:"tpm"`
	RPD         int64 `json:"rpd"`
	TPD         int64 `json:"tpd"`
	InputTPM    int64 `json:"input_tpm"`
	OutputTPM   int64 `json:"output_tpm"`
	Concurrency int64 `json:"concurrency"`
}

// LoadFile reads the configuration file at path, its keys from env (os.Getenv
// in the command). Errors say which field to fix.
func LoadFile(path string, env func(string) string) (File, error) {
	var f File
	raw, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%w: %s: %v (see docs/proxy.md for the format)", ErrInvalid, path, err)
	}
	if f.Version == 0 {
		f.Version = 2
	}
	if f.Version < 2 {
		return f, fmt.Errorf("%w: %s: version %d: give 2 or more (learned limits are version 1)", ErrInvalid, path, f.Version)
	}
	seen := map[string]string{}
	read := func(where, name string) (string, error) {
		if name == "" {
			return "", fmt.Errorf("%w: %s: %s has no key_env: name the environment variable that holds the key", ErrInvalid, path, where)
		}
		v := env(name)
		if v == "" {
			return "", fmt.Errorf("%w: %s: %s: the environment variable %s is empty or unset", ErrInvalid, path, where, name)
		}
		if other, dup := seen[v]; dup {
			return "", fmt.Errorf("%w: %s: %s and %s hold the same key: give each key once", ErrInvalid, path, other, where)
		}
		seen[v] = where
		return v, nil
	}
	for i := range f.Keys {
		k := &f.Keys[i]
		where := fmt.Sprintf("keys[%d]", i)
		if k.Provider != "openai" && k.Provider != "anthropic" && k.Provider != "azure" && k.Provider != "gemini" {
			return f, fmt.Errorf("%w: %s: %s.provider %q: give openai, anthropic, azure or gemini", ErrInvalid, path, where, k.Provider)
		}
		if k.key, err = read(where, k.KeyEnv); err != nil {
			return f, err
		}
		for j := range k.Clients {
			c := &k.Clients[j]
			cw := fmt.Sprintf("%s.clients[%d]", where, j)
			if c.Tenant == "" {
				return f, fmt.Errorf("%w: %s: %s has no tenant: name the tenant its calls are charged to", ErrInvalid, path, cw)
			}
			if c.key, err = read(cw, c.KeyEnv); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}

// limits returns l as a pacer.Config's Limits and Rates.
func (l Limits) limits() (pacer.Limits, []pacer.Rate) {
	var rates []pacer.Rate
	for _, r := range []struct {
		n    int64
		unit pacer.Unit
	}{{l.InputTPM, pacer.InputTokens}, {l.OutputTPM, pacer.OutputTokens}} {
		if r.n > 0 {
			rates = append(rates, pacer.Rate{Unit: r.unit, Limit: r.n, Window: time.Minute})
		}
	}
	return pacer.Limits{RPM: l.RPM, TPM: l.TPM, RPD: l.RPD, TPD: l.TPD, Concurrency: l.Concurrency}, rates
}

// tenants returns k's pacer.Tenants.
func (k Key) tenants() pacer.Tenants {
	t := pacer.Tenants{Share: k.Share}
	lim, rates := k.TenantLimits.limits()
	for _, r := range []struct {
		n      int64
		unit   pacer.Unit
		window time.Duration
	}{{lim.RPM, pacer.Requests, time.Minute}, {lim.TPM, pacer.Tokens, time.Minute}, {lim.RPD, pacer.Requests, 24 * time.Hour}, {lim.TPD, pacer.Tokens, 24 * time.Hour}} {
		if r.n > 0 {
			t.Rates = append(t.Rates, pacer.Rate{Unit: r.unit, Limit: r.n, Window: r.window})
		}
	}
	t.Rates = append(t.Rates, rates...)
	return t
}
