package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the parsed command line.
type options struct {
	scenarios []string
	mode      string // per-worker, shared or both
	params    params // the knobs scenarios share, as given on the command line
	set       map[string]bool
	redisURL  string
	cluster   []string
	json      bool
	quiet     bool
	svg       string
	seed      uint64
	procs     int      // OS processes per row
	args      []string // as given, for -procs' children
}

// Limits on flag values: past them a value is a typo, not an experiment.
const (
	maxWorkers = 10_000
	maxJobs    = 1_000_000
	maxCount   = 1 << 40 // any token count
	maxRetries = 100
	maxProcs   = 64
	maxMargin  = time.Second
	minWallWin = 10 * time.Millisecond
	maxWallWin = time.Minute
	maxLatency = time.Minute
	minSpeed   = 0.01
	maxSpeed   = 1000
)

// parseFlags reads args. Errors name the flag and say what would be right.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./storm [flags]\n\n"+
			"Runs workers against a simulated LLM provider, each with its own limiter\n"+
			"(per-worker) and then sharing one llmpacer budget in Redis (shared), and\n"+
			"prints what the provider saw.\n\nScenarios: %s, or all.\n"+
			"Flags left unset take each scenario's own defaults (see docs/storm.md).\n\n",
			strings.Join(scenarioNames(), ", "))
		fs.PrintDefaults()
	}
	var o options
	d := baseParams()
	scenario := fs.String("scenario", "default", "scenarios to run: comma-separated `names`, or all")
	fs.StringVar(&o.mode, "mode", "both", "which rows to run: per-worker, shared or both")
	fs.IntVar(&o.params.workers, "workers", d.workers, "concurrent workers")
	fs.IntVar(&o.params.jobs, "jobs", d.jobs, "jobs to run")
	fs.Int64Var(&o.params.tokens, "tokens", d.tokens, "tokens per job: prompt + max_tokens")
	output := fs.String("output", "1", "real output per call: a fraction of max_tokens (0..1, or 40%) or a token count (>1)")
	fs.Int64Var(&o.params.providerTokens, "provider-tokens", d.providerTokens, "tokens the provider admits per window")
	fs.Int64Var(&o.params.providerReqs, "provider-requests", d.providerReqs, "calls the provider admits per window (0: no request limit)")
	provWindow := fs.String("provider-window", "bucket", "provider's algorithm: bucket (token bucket) or sliding (strict sliding window)")
	fs.BoolVar(&o.params.providerRefund, "provider-refund", d.providerRefund, "the provider gives unused max_tokens back when a call ends, as Anthropic and Azure OpenAI do; shared budgets then refund too (else NoRefund). mixed shows both kinds unless this is set")
	fs.DurationVar(&o.params.window, "window", d.window, "the provider's window, before -speed")
	fs.DurationVar(&o.params.latency, "latency", d.latency, "time an admitted call takes, before -speed")
	burst := fs.String("burst", "", "shared budget's burst: a fraction of the limit (0..1) or tokens (>1); default the limit, 0.1 for -provider-window sliding")
	fs.IntVar(&o.params.retries, "retries", d.retries, "retries per job after a 429, both modes")
	fs.DurationVar(&o.params.margin, "margin", d.margin, "wall time a call may take from the budget's admission to the provider's count: shared budgets leave it (see docs/storm.md); raise it on a loaded machine")
	fs.Float64Var(&o.params.speed, "speed", d.speed, "divide windows, latencies, arrivals and delays by this factor")
	fs.StringVar(&o.redisURL, "redis", "", "a real Redis on this machine, `redis://host:port` (default: in-process miniredis)")
	cluster := fs.String("cluster", "", "a Redis Cluster on this machine, `host:port,host:port`")
	fs.BoolVar(&o.json, "json", false, "print results as JSON on stdout instead of tables")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress line on stderr")
	fs.StringVar(&o.svg, "svg", "", "write a timeline chart to this `file` (one file per scenario when several run)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for job sizes and arrival times")
	fs.IntVar(&o.procs, "procs", 1, "run each row's workers and jobs in `N` OS processes (this program, started again) sharing the budget in Redis (-redis, -cluster, or this process's miniredis) and the one provider this process serves")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: every setting is a flag (see -h)", fs.Arg(0))
	}
	o.args = slices.Clone(args)
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })

	var err error
	if o.scenarios, err = parseScenarios(*scenario); err != nil {
		return o, err
	}
	if o.params.output, err = parseAmount("output", *output, true); err != nil {
		return o, err
	}
	if *burst != "" {
		if o.params.burst, err = parseAmount("burst", *burst, false); err != nil {
			return o, err
		}
	}
	switch *provWindow {
	case "bucket":
	case "sliding":
		o.params.sliding = true
	default:
		return o, fmt.Errorf("-provider-window %q: want bucket or sliding", *provWindow)
	}
	if *cluster != "" {
		o.cluster = strings.Split(*cluster, ",")
	}
	return o, o.validate()
}

// validate checks what each flag can be checked for on its own; buildPlan
// checks how they combine with a scenario (a job larger than the limit, a
// burst that cannot hold a job).
func (o options) validate() error {
	errs := o.params.check()
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !slices.Contains([]string{"per-worker", "shared", "both"}, o.mode) {
		bad("-mode %q: want per-worker, shared or both", o.mode)
	}
	if o.procs < 1 || o.procs > maxProcs {
		bad("-procs %d: want 1 to %d", o.procs, maxProcs)
	}
	if o.redisURL != "" && len(o.cluster) > 0 {
		bad("-redis and -cluster: give one or the other")
	}
	if o.redisURL != "" {
		if _, err := redisOptions(o.redisURL); err != nil {
			errs = append(errs, err)
		}
	}
	for _, a := range o.cluster {
		if err := checkLoopback("-cluster", a); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// amount is a quantity given either as a fraction of some total or as a
// number of tokens. The zero amount is unset.
type amount struct {
	frac   float64 // used when tokens == 0 and isFrac
	tokens int64
	isFrac bool
}

// parseAmount reads "0.4", "40%" (fractions) or "4000" (tokens). A value up
// to 1 is a fraction; zero is allowed only when zeroOK.
func parseAmount(name, s string, zeroOK bool) (amount, error) {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err == nil && pct {
		v /= 100
	}
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return amount{}, fmt.Errorf("-%s %q: want a fraction (0.4 or 40%%) or a token count (4000)", name, s)
	case v < 0 || (v == 0 && !zeroOK):
		return amount{}, fmt.Errorf("-%s %q: must be above zero", name, s)
	case pct && v > 1:
		return amount{}, fmt.Errorf("-%s %q: a percentage must be at most 100%%", name, s)
	case v <= 1:
		return amount{frac: v, isFrac: true}, nil
	case v != math.Trunc(v) || v > maxCount:
		return amount{}, fmt.Errorf("-%s %q: a token count must be a whole number up to %d", name, s, int64(maxCount))
	}
	return amount{tokens: int64(v)}, nil
}

// of resolves the amount against total: a fraction of it, or the token
// count capped at it.
func (a amount) of(total int64) int64 {
	if a.isFrac {
		return int64(math.Round(a.frac * float64(total)))
	}
	return min(a.tokens, total)
}

func (a amount) isZero() bool { return a == amount{} }

func (a amount) String() string {
	if a.isFrac {
		return strconv.FormatFloat(a.frac, 'g', -1, 64)
	}
	return strconv.FormatInt(a.tokens, 10)
}

func parseScenarios(s string) ([]string, error) {
	if s == "all" {
		return scenarioNames(), nil
	}
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if _, ok := findScenario(name); !ok {
			return nil, fmt.Errorf("-scenario %q: unknown; want one or more of %s, or all", name, strings.Join(scenarioNames(), ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}
