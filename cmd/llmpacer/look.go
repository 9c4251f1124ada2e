package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// look runs list and show: once, or with -watch every -interval until
// ctx ends. A failed refresh while watching is reported on stderr and the
// watch goes on: Redis may come back.
func look(ctx context.Context, o options, rdb redis.UniversalClient, where string, stdout, stderr io.Writer) error {
	tty := isTerminal(stdout)
	for {
		l, err := gather(ctx, o, rdb, where)
		if o.watch && ctx.Err() != nil {
			return nil // interrupted: the watch is over
		}
		if err == nil {
			if o.json {
				// Output nobody reads ends the watch too.
				if err := json.NewEncoder(stdout).Encode(l); err != nil {
					return fmt.Errorf("writing the listing: %w", err)
				}
			} else {
				if o.watch && tty {
					fmt.Fprint(stdout, "\x1b[H\x1b[2J") // clear the screen
				}
				printListing(stdout, o, l)
			}
		}
		if !o.watch {
			if err != nil {
				return err
			}
			return l.outcome()
		}
		if err != nil {
			fmt.Fprintf(stderr, "llmpacer: %v (retrying in %v)\n", err, o.interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.interval):
		}
	}
}

// gather reads what list or show asks for, within -timeout.
func gather(ctx context.Context, o options, rdb redis.UniversalClient, where string) (listing, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	l := listing{Redis: where, Prefix: o.prefix, Budgets: []budget{}}
	r := reader{rdb: rdb, o: o}
	if o.cmd == "list" {
		s, err := scanBudgets(ctx, rdb, o.prefix, o.scan)
		if err != nil {
			return l, timedOut(ctx, o, fmt.Errorf("scanning the keys under prefix %q: %w", o.prefix, err))
		}
		l.KeysMatched, l.Truncated = s.matched, s.cut
		for _, name := range s.sortedNames() {
			l.Budgets = append(l.Budgets, r.read(ctx, name, s.budgets[name].tenants))
		}
		return l, timedOut(ctx, o, nil)
	}
	for _, name := range o.names {
		n, err := budgetKeys(ctx, rdb, o.prefix, name)
		if err != nil {
			return l, timedOut(ctx, o, err)
		}
		var hashes []string
		if o.tenants > 0 {
			var matched int
			var cut bool
			if hashes, matched, cut, err = scanTenants(ctx, rdb, o.prefix, name, o.scan); err != nil {
				return l, timedOut(ctx, o, fmt.Errorf("scanning the tenants of %q: %w", name, err))
			}
			l.KeysMatched += matched
			l.Truncated = l.Truncated || cut
		}
		l.KeysMatched += int(n)
		if n == 0 && len(hashes) == 0 {
			l.Missing = append(l.Missing, name)
			continue
		}
		l.Budgets = append(l.Budgets, r.read(ctx, name, hashes))
	}
	return l, timedOut(ctx, o, nil)
}

// timedOut names -timeout when ctx's deadline ended the work.
func timedOut(ctx context.Context, o options, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("not done within -timeout %v: Redis is slow or unreachable, or there is much to read (lower -scan or -tenant-scan, or raise -timeout)", o.timeout)
	}
	return err
}

// budgetKeys counts which of a budget's four keys exist (they share one
// hash slot, so one EXISTS asks for all on a cluster too).
func budgetKeys(ctx context.Context, rdb redis.UniversalClient, prefix, name string) (int64, error) {
	t := tag(prefix, name)
	n, err := rdb.Exists(ctx, wire.Keys(t)...).Result()
	if err != nil {
		return 0, fmt.Errorf("looking for budget %q: %w", name, err)
	}
	return n, nil
}

// outcome is the error, if any, that a listing's exit code reports: a
// budget named and not found, or one that could not be read.
func (l listing) outcome() error {
	var bad []string
	for _, b := range l.Budgets {
		if b.Error != "" {
			bad = append(bad, b.Name)
		}
	}
	if len(l.Missing) > 0 {
		return &notFoundError{fmt.Sprintf("no budget %q under prefix %q on %s: llmpacer list shows the budgets there (names are case-sensitive)", strings.Join(l.Missing, `", "`), l.Prefix, l.Redis)}
	}
	if len(bad) > 0 {
		return fmt.Errorf("could not read %q: see the error under each", strings.Join(bad, `", "`))
	}
	return nil
}

// isTerminal reports whether w is a terminal, whose screen a watch
// clears at each refresh.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
