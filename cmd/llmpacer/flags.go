package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// options are the parsed command line.
type options struct {
	cmd   string   // list, show, pause, stop or resume
	names []string // the budgets show or an action names

	prefix     string
	watch      bool
	interval   time.Duration
	json       bool
	tenants    int // busiest tenants shown per budget
	tenantScan int // most tenants read per budget
	scan       int // most keys SCAN examines
	timeout    time.Duration
	dur        time.Duration // -for: pause and stop

	redis, cluster string // addresses in place of the environment's
	allowRemote    bool
	force          bool
}

// Bounds on the counts and durations the flags take: past them a value is
// surely a typo, and a scan or a read that large would load Redis.
const (
	maxShown      = 1000
	maxTenantScan = 100_000
	maxScan       = 100_000_000
	minInterval   = 100 * time.Millisecond
	maxFor        = 7 * 24 * time.Hour // as pacer's Pause and Stop
)

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// notFoundError is a budget named but absent: exit code 3.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// exitCode returns the exit code for err (not nil).
func exitCode(err error) int {
	var u *usageError
	var nf *notFoundError
	switch {
	case errors.As(err, &u):
		return exitUsage
	case errors.As(err, &nf):
		return exitNotFound
	}
	return exitFailed
}

const usageText = `Usage:
  llmpacer [flags] [list]            every budget under -prefix
  llmpacer [flags] show NAME...      the budgets named
  llmpacer pause -for D NAME         every caller of NAME waits D (a pause only grows)
  llmpacer stop -for D NAME          every call of NAME is refused for D
  llmpacer resume NAME               end NAME's stop (an operator's or a quota stop)
  llmpacer proxy [proxy flags]       a pacing reverse proxy (llmpacer proxy -h)

NAME is the budget's Config.Name; a budget with a Config.HashTag (a Group's
deployments) is {HASHTAG}NAME, as list shows it: llmpacer show '{eu}gpt-4o'.

The Redis: LLMPACER_REDIS_URL (redis:// or rediss://) or LLMPACER_REDIS_CLUSTER
(comma-separated nodes); credentials only from the environment (the URL,
LLMPACER_REDIS_USERNAME, LLMPACER_REDIS_PASSWORD); LLMPACER_REDIS_CA_FILE for a
private certificate authority.

Exit codes: 0 done, 1 Redis failed or a budget could not be read, 2 usage,
3 the budget named has no keys.

Flags (before or after the command):
`

// parseArgs parses the command line. Flags may come before or after the
// command and the names, as operators type them.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("llmpacer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.prefix, "prefix", wire.DefaultPrefix, "the budgets' key prefix (Config.KeyPrefix)")
	fs.BoolVar(&o.watch, "watch", false, "list or show again every -interval, until interrupted")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "how often -watch refreshes")
	fs.BoolVar(&o.json, "json", false, "print JSON: one document, or one line per refresh with -watch")
	fs.IntVar(&o.tenants, "tenants", 5, "the most tenants shown per budget, those with the least room first (0: none)")
	fs.IntVar(&o.tenantScan, "tenant-scan", 500, "the most tenants read per budget to find the busiest")
	fs.IntVar(&o.scan, "scan", 100_000, "the most keys SCAN examines to find budgets and tenants")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "the longest one listing or change may take")
	fs.DurationVar(&o.dur, "for", 0, "how long pause or stop lasts (at most 168h)")
	fs.StringVar(&o.redis, "redis", "", "a Redis address (host:port or URL, no credentials) in place of LLMPACER_REDIS_URL")
	fs.StringVar(&o.cluster, "cluster", "", "comma-separated cluster nodes (no credentials) in place of LLMPACER_REDIS_CLUSTER")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "let pause, stop and resume change a Redis that is not on loopback")
	fs.BoolVar(&o.force, "force", false, "pause or stop a budget that has no keys yet (check the name first)")

	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return o, err
			}
			return o, &usageError{err.Error() + " (llmpacer -h lists the flags)"}
		}
		rest := fs.Args()
		// "--" ends the flags: what follows is names, even "-x".
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) == 0 {
		pos = []string{"list"}
	}
	o.cmd, o.names = pos[0], pos[1:]
	return o, o.check(fs)
}

// check refuses a command line that does not fit together.
func (o options) check(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch o.cmd {
	case "list":
		if len(o.names) > 0 {
			return usagef("list takes no names (got %q): use show NAME to see one budget", o.names)
		}
	case "show":
		if len(o.names) == 0 {
			return usagef("show needs the name of a budget: llmpacer show NAME (llmpacer list shows them all)")
		}
	case "pause", "stop", "resume":
		if len(o.names) != 1 {
			return usagef("%s takes exactly one budget name, got %d: llmpacer %s NAME", o.cmd, len(o.names), o.cmd)
		}
		if o.watch {
			return usagef("-watch is for list and show, not %s", o.cmd)
		}
	default:
		if o.cmd == "proxy" {
			return usagef("proxy takes its own flags after it: llmpacer proxy -listen ADDR (llmpacer proxy -h)")
		}
		return usagef("unknown command %q: use list, show, pause, stop, resume or proxy", o.cmd)
	}
	needFor := o.cmd == "pause" || o.cmd == "stop"
	switch {
	case needFor && !set["for"]:
		return usagef("%s needs -for: how long, e.g. llmpacer %s -for 10m NAME", o.cmd, o.cmd)
	case needFor && (o.dur < time.Millisecond || o.dur > maxFor):
		return usagef("-for %v: give a duration from 1ms to %v", o.dur, maxFor)
	case !needFor && set["for"]:
		return usagef("-for is for pause and stop, not %s", o.cmd)
	case set["force"] && !needFor:
		return usagef("-force is for pause and stop, not %s", o.cmd)
	case o.interval < minInterval:
		return usagef("-interval %v: refresh at most every %v, so that watching does not load Redis", o.interval, minInterval)
	case o.tenants < 0 || o.tenants > maxShown:
		return usagef("-tenants %d: show from 0 to %d tenants", o.tenants, maxShown)
	case o.tenantScan < 1 || o.tenantScan > maxTenantScan:
		return usagef("-tenant-scan %d: read from 1 to %d tenants per budget", o.tenantScan, maxTenantScan)
	case o.scan < 1 || o.scan > maxScan:
		return usagef("-scan %d: examine from 1 to %d keys", o.scan, maxScan)
	case o.timeout <= 0:
		return usagef("-timeout %v: give a positive duration, e.g. 10s", o.timeout)
	case o.redis != "" && o.cluster != "":
		return usagef("-redis and -cluster both given: name one server or one cluster")
	}
	if err := checkPrefix(o.prefix); err != nil {
		return err
	}
	for _, n := range o.names {
		if err := checkName(n); err != nil {
			return err
		}
	}
	return nil
}

// checkPrefix and checkName refuse a key prefix or budget name that no
// budget can have, before it reaches a key pattern: pacer refuses the
// rest of what it would never write (spaces, control characters) when the
// budget is opened.
func checkPrefix(prefix string) error {
	if prefix == "" || strings.ContainsAny(prefix, "{}") {
		return usagef("-prefix %q: give the budgets' Config.KeyPrefix, without '{' or '}' (default %q)", prefix, wire.DefaultPrefix)
	}
	return nil
}

func checkName(name string) error {
	tag, bare := wire.SplitTag(name)
	if bare == "" || strings.ContainsAny(bare, "{}") || (tag == "" && strings.HasPrefix(name, "{")) {
		return usagef("budget name %q: give the budget's Config.Name, without '{' or '}', or {HASHTAG}NAME for a budget with a Config.HashTag", name)
	}
	return nil
}
