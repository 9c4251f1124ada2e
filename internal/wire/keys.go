package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// DefaultPrefix is Config.KeyPrefix's default, which the llmpacer command
// also takes for its -prefix flag.
const DefaultPrefix = "llmpacer"

// KeyTag returns what begins every key of budget name under prefix:
// "{prefix:name}", or "{hashTag}prefix:name" for a budget with a
// Config.HashTag. The braces make Redis Cluster hash only what is inside,
// so a budget's keys, or a HashTag's budgets, share one slot.
func KeyTag(prefix, name, hashTag string) string {
	if hashTag != "" {
		return "{" + hashTag + "}" + prefix + ":" + name
	}
	return "{" + prefix + ":" + name + "}"
}

// SplitTag splits a name as operators write it, "{hashTag}name" for a
// budget with a Config.HashTag or a plain name, into the hash tag ("" for a
// plain name) and the budget's Config.Name. Anything else with braces is
// returned whole, for the caller's name check to refuse.
func SplitTag(s string) (hashTag, name string) {
	if len(s) == 0 || s[0] != '{' {
		return "", s
	}
	end := strings.IndexByte(s, '}')
	if end <= 1 || end == len(s)-1 {
		return "", s
	}
	return s[1:end], s[end+1:]
}

// Evicts says why a Redis server with maxmemory-policy policy may evict a
// budget's keys under memory pressure, or "" if it never does. Every key
// of a budget has a TTL, so the volatile-* policies evict them too. The
// Pacer and the llmpacer command both warn with it.
func Evicts(policy string) string {
	switch {
	case policy == "" || policy == "noeviction":
		return ""
	case strings.HasPrefix(policy, "volatile-"):
		return "maxmemory-policy " + policy + " evicts keys with a TTL under memory pressure, and every key of a budget has one"
	}
	return "maxmemory-policy " + policy + " evicts any key under memory pressure"
}

// The suffixes that follow a budget's KeyTag in each of its keys
// (docs/lua-contract.md, KEYS): its state hash, lease set, slot queue and
// stored definition; and a tenant's hash, followed by TenantHash of its id.
// The Pacer and the llmpacer command both spell keys with them.
const (
	StateSuffix      = ":s"
	LeasesSuffix     = ":l"
	QueueSuffix      = ":q"
	DefinitionSuffix = ":d"
	TenantSuffix     = ":t:"
)

// tenantHashLen is how many hex digits TenantHash returns.
const tenantHashLen = 32

// Keys returns the four keys of the budget whose KeyTag is tag, in the
// order the scripts take them: KEYS[1] to KEYS[4].
func Keys(tag string) []string {
	return []string{tag + StateSuffix, tag + LeasesSuffix, tag + QueueSuffix, tag + DefinitionSuffix}
}

// TenantHash names tenant id's hash: the first 16 bytes of its SHA-256 in
// lowercase hex, so that no id can name another key.
func TenantHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:tenantHashLen/2])
}

// TenantKey returns the key of the tenant whose TenantHash is hash, in the
// budget whose KeyTag is tag.
func TenantKey(tag, hash string) string { return tag + TenantSuffix + hash }

// CutSuffix splits what follows a budget's prefix in one of its keys
// ("name:s", or "name:t:" and a tenant's hash) into the name and, for a
// tenant's key, the hash. ok is false for anything else.
func CutSuffix(rest string) (name, tenantHash string, ok bool) {
	if i := strings.LastIndex(rest, TenantSuffix); i > 0 {
		h := rest[i+len(TenantSuffix):]
		if b, err := hex.DecodeString(h); err == nil && len(h) == tenantHashLen && hex.EncodeToString(b) == h {
			return rest[:i], h, true
		}
	}
	for _, s := range []string{StateSuffix, LeasesSuffix, QueueSuffix, DefinitionSuffix} {
		if name, ok := strings.CutSuffix(rest, s); ok && name != "" {
			return name, "", true
		}
	}
	return "", "", false
}
