package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

// With -procs N a row's jobs run in N OS processes, as an application's
// processes would share a budget: the storm starts itself again N times,
// each child with its share of the workers and jobs, its own Pacer (or
// per-worker limiters) on the same Redis, and its own connections to the
// one provider, which the parent serves and counts. The parent tells the
// children when to start and adds up what they report.
//
// A child learns its part from childEnv, a JSON childSpec, and gets the
// same flags as the parent, so that it builds the same plan. It speaks on
// stdout in lines: "ready" once set up, "done" after each job, and last a
// JSON childReport. It reads the start time, in Unix nanoseconds, on stdin.

// childEnv names the environment variable that makes the storm a child.
const childEnv = "LLMPACER_STORM_CHILD"

// childSpec is a child's part of a row.
type childSpec struct {
	Scenario string `json:"scenario"`
	Row      string `json:"row"`   // its label
	Proc     int    `json:"proc"`  // this child, 0 to Procs-1
	Procs    int    `json:"procs"` // children in all
	URL      string `json:"url"`   // the parent's provider
	Redis    string `json:"redis"` // the parent's Redis, or "" for its -redis / -cluster
	Budget   string `json:"budget"`
}

// childReport is what a child sends back when its jobs have ended.
type childReport struct {
	Results  []childResult `json:"results"`
	Commands int64         `json:"redis_commands"`
	// Calls are a tenants lane's calls (see tenants_procs.go).
	Calls []tenantResult `json:"calls,omitempty"`
}

// childResult is a jobResult on the wire.
type childResult struct {
	Priority pacer.Priority `json:"priority"`
	Ran      bool           `json:"ran"`
	Start    int64          `json:"start"` // Unix nanoseconds
	End      int64          `json:"end"`
	InCalls  time.Duration  `json:"in_calls"`
	Attempts int            `json:"attempts"`
	Err      string         `json:"err,omitempty"`
	Quota    bool           `json:"quota,omitempty"` // the error was an exhausted quota
}

// share returns the jobs and the number of workers of child k of n: every
// n-th job from the k-th, and the workers dealt out as evenly.
func share(jobs []job, workers, k, n int) ([]job, int) {
	var mine []job
	for i := k; i < len(jobs); i += n {
		mine = append(mine, jobs[i])
	}
	w := workers / n
	if k < workers%n {
		w++
	}
	return mine, w
}

// runRowProcs runs row i in pl.procs child processes against the provider
// fp at url, and reads its counters as runRow does.
func runRowProcs(ctx context.Context, pl *plan, i int, be *backend, budgetName string, prog *progress,
	fp *fakeprovider.Provider, rec *recorder, url string) (rowResult, error) {
	v := pl.rows[i]
	// The row's description, as the children will set it up.
	c := newChatClient(url, 1)
	defer c.close()
	rs, err := setupRow(pl, v, be, budgetName, c)
	if err != nil {
		return rowResult{}, err
	}
	row := rs.row
	exe, err := os.Executable()
	if err != nil {
		return rowResult{}, fmt.Errorf("-procs: finding this program to start it again: %w", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kids := make([]*child, pl.procs)
	for k := range kids {
		spec := childSpec{Scenario: pl.name, Row: v.label, Proc: k, Procs: pl.procs, URL: url, Redis: be.addr, Budget: budgetName}
		if kids[k], err = startChild(cctx, exe, pl.args, spec, prog); err != nil {
			return rowResult{}, err
		}
	}
	defer func() {
		for _, k := range kids {
			k.wait()
		}
	}()
	for _, k := range kids {
		if err := k.awaitReady(cctx); err != nil {
			return rowResult{}, err
		}
	}
	// Every child is set up: start them together, a moment from now.
	start := time.Now().Add(50 * time.Millisecond)
	fp.ResetStats()
	rec.reset(start)
	prog.begin(pl.name, v.label, len(pl.jobs), rec)
	for _, k := range kids {
		if _, err := fmt.Fprintln(k.stdin, start.UnixNano()); err != nil {
			prog.end()
			return rowResult{}, fmt.Errorf("-procs: starting child %d: %w", k.spec.Proc, err)
		}
	}
	var results []jobResult
	var errs []error
	for _, k := range kids {
		rep, err := k.report()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		row.RedisCommands += rep.Commands
		for _, r := range rep.Results {
			results = append(results, r.jobResult())
		}
	}
	prog.end()
	if err := ctx.Err(); err != nil {
		return rowResult{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return rowResult{}, err
	}
	// The row ends when its last job does, as seen by the child that ran
	// it; a child's exit is not part of the run.
	end := start
	for _, r := range results {
		end = later(end, r.end)
	}
	row.fill(fp.Stats(), results, end.Sub(start))
	row.events = rec.snapshot()
	return row, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (r childResult) jobResult() jobResult {
	j := jobResult{priority: r.Priority, ran: r.Ran, start: time.Unix(0, r.Start), end: time.Unix(0, r.End),
		inCalls: r.InCalls, attempts: r.Attempts}
	switch {
	case r.Quota:
		j.err = fmt.Errorf("%w (in a child: %s)", pacer.ErrQuotaExhausted, r.Err)
	case r.Err != "":
		j.err = errors.New(r.Err)
	}
	return j
}

// child is one running child process of a row.
type child struct {
	spec  childSpec
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan struct{}
	done  chan struct{} // closed when its stdout has ended
	rep   *childReport
	err   error // what went wrong, once done is closed

	reaped sync.Once
}

// startChild starts the storm again as child spec, with the parent's
// flags, its stderr shared with this process's.
func startChild(ctx context.Context, exe string, args []string, spec childSpec, prog *progress) (*child, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("-procs: starting child %d: %w", spec.Proc, err)
	}
	k := &child{spec: spec, cmd: cmd, stdin: stdin, ready: make(chan struct{}), done: make(chan struct{})}
	go k.read(stdout, prog)
	return k, nil
}

// read follows the child's stdout until it ends.
func (k *child) read(stdout io.Reader, prog *progress) {
	defer close(k.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	ready := false
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case string(line) == "ready" && !ready:
			ready = true
			close(k.ready)
		case string(line) == "done":
			prog.jobDone()
		case len(line) > 0 && line[0] == '{':
			var rep childReport
			if err := json.Unmarshal(line, &rep); err != nil {
				k.err = fmt.Errorf("-procs: child %d's report: %w", k.spec.Proc, err)
				return
			}
			k.rep = &rep
		}
	}
	if err := sc.Err(); err != nil {
		k.err = fmt.Errorf("-procs: reading child %d: %w", k.spec.Proc, err)
	}
}

// awaitReady waits until the child is set up, or has failed.
func (k *child) awaitReady(ctx context.Context) error {
	select {
	case <-k.ready:
		return nil
	case <-k.done:
		k.wait()
		return fmt.Errorf("-procs: child %d ended before it was ready: %v", k.spec.Proc, k.exitErr())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// report waits for the child's report and its exit.
func (k *child) report() (*childReport, error) {
	<-k.done
	k.wait()
	switch {
	case k.err != nil:
		return nil, k.err
	case k.rep == nil:
		return nil, fmt.Errorf("-procs: child %d sent no report: %v", k.spec.Proc, k.exitErr())
	}
	return k.rep, k.exitErr()
}

// wait reaps the child once; later calls return at once.
func (k *child) wait() {
	k.reaped.Do(func() {
		_ = k.stdin.Close()
		_ = k.cmd.Wait()
	})
}

func (k *child) exitErr() error {
	if st := k.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("child %d: %v", k.spec.Proc, st)
	}
	return nil
}
