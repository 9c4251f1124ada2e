package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// found is what a scan found of one budget: which of its keys exist, and
// its tenants' hashes.
type found struct {
	name    string
	keys    int      // of the state hash, lease set, slot queue and definition
	tenants []string // the 32 hex digits that name each tenant's key
}

// scanned is what a scan found under a prefix.
type scanned struct {
	budgets map[string]*found
	matched int  // keys of the prefix the scan returned
	cut     bool // the scan stopped at its limit before the end
}

// scanBatch is the COUNT asked of each SCAN call: large enough that a big
// keyspace takes few round trips, small enough that one call stays short.
const scanBatch = 1000

// scanKeys SCANs the keys matching pattern, on every master of a
// cluster, and passes each to fn, until it has examined limit keys (as
// SCAN's COUNT counts them; a server that returns more at once, such as
// miniredis, is cut at limit too). It reports how many keys it passed to
// fn and whether the limit cut the scan.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string, limit int, fn func(string)) (int, bool, error) {
	var mu sync.Mutex
	examined, matched, cut := 0, 0, false
	// take reserves up to n keys of the limit; 0 when none is left.
	take := func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		n = min(n, limit-examined)
		examined += n
		return n
	}
	one := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			n := take(scanBatch)
			if n == 0 {
				mu.Lock()
				cut = true
				mu.Unlock()
				return nil
			}
			keys, next, err := c.Scan(ctx, cursor, pattern, int64(n)).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			if len(keys) > n {
				// More returned than asked for: count them all, and keep
				// those within the limit.
				extra := min(len(keys)-n, limit-examined)
				examined += extra
				if n+extra < len(keys) {
					keys, cut = keys[:n+extra], true
				}
			}
			for _, k := range keys {
				fn(k)
			}
			matched += len(keys)
			stop := cut
			mu.Unlock()
			if next == 0 || stop {
				return nil
			}
			cursor = next
		}
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, one)
	case *redis.Client:
		err = one(ctx, c)
	default:
		err = errors.New("llmpacer: scanning needs a *redis.Client or *redis.ClusterClient")
	}
	return matched, cut, err
}

// scanBudgets finds the budgets under prefix: every key "{prefix:name}"
// plus a known suffix, and every "{tag}prefix:name" plus one (a budget
// with a Config.HashTag, named "{tag}name"). One pattern matches both:
// SCAN walks the whole keyspace whatever it matches, so a second pattern
// would cost a second walk.
func scanBudgets(ctx context.Context, rdb redis.UniversalClient, prefix string, limit int) (scanned, error) {
	s := scanned{budgets: map[string]*found{}}
	var mu sync.Mutex
	var err error
	s.matched, s.cut, err = scanKeys(ctx, rdb, "{*"+globEscape(prefix)+":*", limit, func(key string) {
		name, tenant, ok := parseKey(prefix, key)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		f := s.budgets[name]
		if f == nil {
			f = &found{name: name}
			s.budgets[name] = f
		}
		if tenant != "" {
			f.tenants = append(f.tenants, tenant)
		} else {
			f.keys++
		}
	})
	return s, err
}

// scanTenants finds the tenants of one budget.
func scanTenants(ctx context.Context, rdb redis.UniversalClient, prefix, name string, limit int) ([]string, int, bool, error) {
	var mu sync.Mutex
	var hashes []string
	n, cut, err := scanKeys(ctx, rdb, globEscape(tag(prefix, name)+wire.TenantSuffix)+"*", limit, func(key string) {
		if _, h, ok := parseKey(prefix, key); ok && h != "" {
			mu.Lock()
			hashes = append(hashes, h)
			mu.Unlock()
		}
	})
	return hashes, n, cut, err
}

// tag is what starts each key of budget name under prefix:
// "{prefix:name}", or "{tag}prefix:name" for a name "{tag}name" (a
// budget with a Config.HashTag).
func tag(prefix, name string) string {
	t, bare := wire.SplitTag(name)
	return wire.KeyTag(prefix, bare, t)
}

// parseKey splits a key of a budget under prefix into the budget's name
// ("{tag}name" for a budget with a hash tag) and, for a tenant's key, the
// tenant's hash. ok is false for any other key.
func parseKey(prefix, key string) (name, tenant string, ok bool) {
	if rest, ok := strings.CutPrefix(key, "{"+prefix+":"); ok {
		// "{prefix:name}" and a suffix.
		if name, tenant, ok := wire.CutSuffix(rest); ok {
			if name, ok := strings.CutSuffix(name, "}"); ok && name != "" && !strings.Contains(name, "}") {
				return name, tenant, true
			}
		}
	}
	// "{tag}prefix:name" and a suffix.
	end := strings.IndexByte(key, '}')
	if len(key) == 0 || key[0] != '{' || end <= 1 {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(key[end+1:], prefix+":")
	if !ok {
		return "", "", false
	}
	name, tenant, ok = wire.CutSuffix(rest)
	if !ok || strings.ContainsAny(name, "{}") {
		return "", "", false
	}
	return key[:end+1] + name, tenant, true
}

// globEscape quotes the characters SCAN's MATCH treats specially.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}

// sortedNames returns the budgets' names in order.
func (s scanned) sortedNames() []string {
	names := make([]string, 0, len(s.budgets))
	for n := range s.budgets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
