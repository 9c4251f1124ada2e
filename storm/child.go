package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// childSpecFromEnv reads childEnv, if this process is a child.
func childSpecFromEnv() (childSpec, bool, error) {
	s, ok := os.LookupEnv(childEnv)
	if !ok {
		return childSpec{}, false, nil
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(s), &spec); err != nil {
		return spec, true, fmt.Errorf("%s: %w", childEnv, err)
	}
	return spec, true, nil
}

// runChild is the whole program of a child: it sets up its part of the
// row, says "ready", waits for the start time on stdin, runs its jobs and
// reports them.
func runChild(ctx context.Context, o options, spec childSpec, stdin io.Reader, stdout io.Writer) error {
	pl, err := buildPlan(spec.Scenario, o)
	if err != nil {
		return err
	}
	if pl.tenantLanes != nil {
		if spec.Redis != "" {
			o.redisURL, o.cluster = spec.Redis, nil
		}
		be, err := openRedis(ctx, o)
		if err != nil {
			return err
		}
		defer be.close()
		return runTenantChild(ctx, pl, be, spec, stdin, stdout)
	}
	i := slices.IndexFunc(pl.rows, func(v variant) bool { return v.label == spec.Row })
	if i < 0 || spec.Procs < 1 || spec.Proc < 0 || spec.Proc >= spec.Procs {
		return fmt.Errorf("%s: row %q, child %d of %d do not fit scenario %s", childEnv, spec.Row, spec.Proc, spec.Procs, spec.Scenario)
	}
	if spec.Redis != "" {
		o.redisURL, o.cluster = spec.Redis, nil
	}
	be, err := openRedis(ctx, o)
	if err != nil {
		return err
	}
	defer be.close()
	jobs, workers := share(pl.jobs, pl.p.workers, spec.Proc, spec.Procs)
	conns := workers + 16
	c := newChatClient(spec.URL, conns)
	defer c.close()
	if err := c.warm(ctx, min(conns, 128)); err != nil {
		return err
	}
	rs, err := setupRow(pl, pl.rows[i], be, spec.Budget, c)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stdout, line)
	}
	say("ready")
	start, err := awaitStart(stdin, spec.Proc)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, time.Until(start)); err != nil {
		return err
	}
	cmds0 := be.cmds.Load()
	results := runJobs(ctx, jobs, workers, start, rs.do, func() { say("done") })
	if err := ctx.Err(); err != nil {
		return err
	}
	rep := childReport{Commands: be.cmds.Load() - cmds0}
	for _, r := range results {
		cr := childResult{Priority: r.priority, Ran: r.ran, Start: r.start.UnixNano(), End: r.end.UnixNano(),
			InCalls: r.inCalls, Attempts: r.attempts}
		if r.err != nil {
			cr.Err = r.err.Error()
			cr.Quota = quotaFailure(r.err, rs.row.Mode)
		}
		rep.Results = append(rep.Results, cr)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	say(string(js))
	return nil
}

// awaitStart reads the start time the parent sends a child once every
// child has said "ready" (Unix ns, one line), so that all start together.
func awaitStart(stdin io.Reader, proc int) (time.Time, error) {
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil {
		return time.Time{}, fmt.Errorf("child %d: waiting for the start: %w", proc, err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("child %d: start time %q: %w", proc, line, err)
	}
	return time.Unix(0, ns), nil
}
