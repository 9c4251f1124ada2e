package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/wire"
)

const proxyUsage = `Usage:
  llmpacer proxy [flags]

A pacing reverse proxy: point a client's base URL at it and every model call
waits for its turn on a budget in Redis shared by every replica.
  OPENAI_BASE_URL=http://127.0.0.1:8080/openai/v1
  Anthropic SDK base URL http://127.0.0.1:8080/anthropic
  Azure OpenAI (with -azure) http://127.0.0.1:8080/azure/openai/deployments/NAME/
  Gemini http://127.0.0.1:8080/gemini
Each provider key and model gets its own budget, whose limits are learned
from the provider's rate-limit headers. GET /healthz, /readyz, /metrics.

The Redis: as for the other commands (LLMPACER_REDIS_URL or
LLMPACER_REDIS_CLUSTER, or -redis / -cluster). Logs: JSON lines on stderr.

Flags:
`

// proxyOptions are the proxy's command line.
type proxyOptions struct {
	listen, openai, anthropic string
	azure, gemini             string
	maxWait, grace, idle      time.Duration
	maxBody                   int64
	maxBudgets                int
	prefix                    string
	redis, cluster            string
	config                    string
}

// runProxy is `llmpacer proxy`: it serves until ctx ends (SIGTERM or
// Ctrl-C), then shuts down gracefully.
func runProxy(ctx context.Context, args []string, env func(string) string, stderr io.Writer) int {
	o, err := parseProxyArgs(args, stderr)
	if err != nil {
		return report(stderr, err)
	}
	rdb, where, err := connect(options{cmd: "proxy", redis: o.redis, cluster: o.cluster}, env, stderr)
	if err != nil {
		return report(stderr, err)
	}
	defer rdb.Close()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	var file proxy.File
	if o.config != "" {
		if file, err = proxy.LoadFile(o.config, env); err != nil {
			return report(stderr, &usageError{"-config: " + err.Error()})
		}
	}
	px, err := proxy.New(proxy.Config{
		Redis: rdb, OpenAI: o.openai, Anthropic: o.anthropic, Azure: o.azure, Gemini: o.gemini, KeyPrefix: o.prefix,
		MaxWait: o.maxWait, MaxBody: o.maxBody, MaxBudgets: o.maxBudgets, BudgetIdle: o.idle, Log: log, File: file,
	})
	if err != nil {
		return report(stderr, &usageError{err.Error()})
	}
	if err := ping(ctx, options{timeout: 5 * time.Second}, rdb, where); err != nil {
		// Serve anyway: /readyz says not ready until Redis answers.
		log.Warn("Redis does not answer yet; /readyz fails until it does", "redis", where, "err", err.Error())
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return report(stderr, fmt.Errorf("cannot listen on %s: %w", o.listen, err))
	}
	if !loopback(ln.Addr()) {
		log.Warn("listening beyond loopback: anyone who reaches this address spends the keys sent through it", "addr", ln.Addr().String())
	}
	log.Info("listening", "addr", ln.Addr().String(), "redis", where, "openai", o.openai, "anthropic", o.anthropic, "max_wait", o.maxWait.String())
	return report(stderr, px.Serve(ctx, ln, o.grace))
}

// parseProxyArgs parses the proxy's flags.
func parseProxyArgs(args []string, stderr io.Writer) (proxyOptions, error) {
	var o proxyOptions
	fs := flag.NewFlagSet("llmpacer proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, proxyUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "the address to serve on (loopback unless told otherwise)")
	fs.StringVar(&o.openai, "openai", proxy.DefaultOpenAI, "the OpenAI API's base URL: /openai/<path> goes to <URL>/<path>")
	fs.StringVar(&o.anthropic, "anthropic", proxy.DefaultAnthropic, "the Anthropic API's base URL: /anthropic/<path> goes to <URL>/<path>")
	fs.StringVar(&o.azure, "azure", "", "an Azure OpenAI resource's endpoint, https://NAME.openai.azure.com: /azure/<path> goes to <URL>/<path>")
	fs.StringVar(&o.gemini, "gemini", proxy.DefaultGemini, "the Gemini API's base URL: /gemini/<path> goes to <URL>/<path>")
	fs.DurationVar(&o.maxWait, "max-wait", proxy.DefaultMaxWait, "the longest a call waits for its turn before the client gets the provider's 429")
	fs.DurationVar(&o.grace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long calls in flight (streams too) may take to finish")
	fs.Int64Var(&o.maxBody, "max-body", proxy.DefaultMaxBody, "the largest model-call request body, in bytes; larger ones get 413")
	fs.IntVar(&o.maxBudgets, "max-budgets", proxy.DefaultMaxBudgets, "the most budgets (keys × models) one proxy holds")
	fs.DurationVar(&o.idle, "budget-idle", proxy.DefaultBudgetIdle, "with -max-budgets held, a budget unused this long may be evicted for a new one, least recently used first")
	fs.StringVar(&o.prefix, "prefix", wire.DefaultPrefix, "the budgets' Redis key prefix (Config.KeyPrefix)")
	fs.StringVar(&o.config, "config", "", "a JSON file of provider keys the proxy holds, its clients' proxy keys and tenants, and limits per model (docs/proxy.md)")
	fs.StringVar(&o.redis, "redis", "", "a Redis address (host:port or URL, no credentials) in place of LLMPACER_REDIS_URL")
	fs.StringVar(&o.cluster, "cluster", "", "comma-separated cluster nodes (no credentials) in place of LLMPACER_REDIS_CLUSTER")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, &usageError{err.Error() + " (llmpacer proxy -h lists the flags)"}
	}
	switch {
	case fs.NArg() > 0:
		return o, usagef("proxy takes no arguments (got %q): its settings are flags, llmpacer proxy -h", fs.Args())
	case o.maxWait < time.Millisecond || o.maxWait > maxFor:
		return o, usagef("-max-wait %v: give a duration from 1ms to %v", o.maxWait, maxFor)
	case o.grace < 0:
		return o, usagef("-shutdown-grace %v: give a duration, 0 to cut calls at once", o.grace)
	case o.maxBody < 1:
		return o, usagef("-max-body %d: give a positive number of bytes", o.maxBody)
	case o.maxBudgets < 1:
		return o, usagef("-max-budgets %d: give a positive number", o.maxBudgets)
	case o.idle < time.Millisecond:
		return o, usagef("-budget-idle %v: give a duration of 1ms or more", o.idle)
	case o.redis != "" && o.cluster != "":
		return o, usagef("-redis and -cluster both given: name one server or one cluster")
	}
	return o, checkPrefix(o.prefix)
}

// loopback reports whether a is a loopback address.
func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
