// Command storm makes the case for a shared rate-limit budget. Workers call
// a simulated LLM provider (a real HTTP endpoint on loopback that enforces
// a token limit and answers 429 with retry-after-ms), first each with its
// own limiter set to the provider's limit, then all sharing one llmpacer
// budget in Redis, and the storm prints what the provider saw: calls, 429s,
// failed jobs, tokens per second, against the least time the limit allows.
//
//	go run ./storm                      # the published comparison, ~17 s
//	go run ./storm -scenario all        # every scenario
//	go run ./storm -scenario bursty -svg bursty.svg -json
//
// With no -redis or -cluster it runs on an in-process miniredis; -redis and
// -cluster accept loopback addresses only. docs/storm.md explains each
// scenario and its results.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

// run is the whole program: it parses args, runs each scenario and writes
// the tables (or JSON) to stdout, progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if spec, ok := os.LookupEnv(proxyWorkerEnv); ok {
		return runProxyWorker(ctx, spec, os.Stdin, stdout)
	}
	if spec, ok, err := childSpecFromEnv(); ok {
		if err != nil {
			return err
		}
		o.quiet = true
		return runChild(ctx, o, spec, os.Stdin, stdout)
	}
	// Build every plan first, so a flag that does not fit a scenario fails
	// before anything has run.
	var plans []*plan
	for _, name := range o.scenarios {
		pl, err := buildPlan(name, o)
		if err != nil {
			return err
		}
		plans = append(plans, pl)
	}
	be, err := openRedis(ctx, o)
	if err != nil {
		return err
	}
	defer be.close()
	defer func() { _ = be.cleanup(context.WithoutCancel(ctx)) }()
	for _, pl := range plans {
		if pl.outage != nil && be.mini == nil {
			return fmt.Errorf("scenario %s closes and restarts Redis: run it on the in-process miniredis (without -redis or -cluster)", pl.name)
		}
		if pl.outage != nil {
			// go-redis logs every failed dial of the outage it is shown.
			redis.SetLogger(quietLog{})
		}
	}

	prog := newProgress(stderr, o.quiet)
	var reports []scenarioReport
	for _, pl := range plans {
		rep, err := runPlan(ctx, pl, be, prog)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
		if !o.json {
			printTable(stdout, rep)
		}
		if o.svg != "" {
			path := svgPath(o.svg, rep.Name, len(plans) > 1)
			if err := os.WriteFile(path, renderSVG(rep), 0o644); err != nil {
				return err
			}
			if !o.json {
				fmt.Fprintf(stdout, "  chart: %s\n\n", path)
			}
		}
	}
	if o.json {
		return writeJSON(stdout, reports)
	}
	return nil
}

// svgPath names the chart of one scenario: the -svg path itself when one
// scenario runs, else the scenario's name before the extension.
func svgPath(path, scenario string, several bool) string {
	if !several {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + scenario + ext
}

// quietLog discards go-redis's own log lines.
type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}
