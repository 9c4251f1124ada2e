package wire

import "strings"

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
