package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// With -procs N, each lane of the tenants scenario runs in N OS processes
// that share its budget in Redis, as an application's processes would:
// child k of a lane runs every N-th of the lane's calls from the k-th,
// with its own Pacer, against the provider this process serves. The
// protocol is a row's (see procs.go): "ready", "done" after each call, a
// JSON report last; the start time on stdin. Row is the lane: 0 with the
// heavy tenant, 1 alone.

// tenantResult is one call's result on the wire.
type tenantResult struct {
	Tenant string        `json:"tenant"`
	Group  string        `json:"group"`
	Wait   time.Duration `json:"wait"`
	Err    string        `json:"err,omitempty"`
}

// runTenantProcs runs lane i's calls in pl.procs children against the
// provider at url, from the start ready returns once they are all ready,
// and returns their results.
func runTenantProcs(ctx context.Context, pl *plan, be *backend, i int, name, url string, ready func() (time.Time, error), prog *progress) ([]callResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("-procs: finding this program to start it again: %w", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	forgetLane(be, name, pl.tenantLanes[i])
	kids := make([]*child, pl.procs)
	for k := range kids {
		spec := childSpec{Scenario: pl.name, Row: strconv.Itoa(i), Proc: k, Procs: pl.procs, URL: url, Redis: be.addr, Budget: name}
		if kids[k], err = startChild(cctx, exe, pl.args, spec, prog); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, k := range kids {
			k.wait()
		}
	}()
	for _, k := range kids {
		if err := k.awaitReady(cctx); err != nil {
			return nil, err
		}
	}
	start, err := ready()
	if err != nil {
		return nil, err
	}
	for _, k := range kids {
		if _, err := fmt.Fprintln(k.stdin, start.UnixNano()); err != nil {
			return nil, fmt.Errorf("-procs: starting child %d: %w", k.spec.Proc, err)
		}
	}
	var out []callResult
	var errs []error
	for _, k := range kids {
		rep, err := k.report()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range rep.Calls {
			r := callResult{call: call{tenant: c.Tenant, group: c.Group}, start: start, end: start.Add(c.Wait)}
			if c.Err != "" {
				r.err = errors.New(c.Err)
			}
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// forgetLane has be's cleanup delete the keys that the children write for
// budget name and the tenants of calls: this process sends them no
// script, so its hook never sees them.
func forgetLane(be *backend, name string, calls []call) {
	tag := wire.KeyTag(wire.DefaultPrefix, name, "")
	for _, k := range wire.Keys(tag) {
		be.keys.Store(k, struct{}{})
	}
	for _, c := range calls {
		be.keys.Store(wire.TenantKey(tag, wire.TenantHash(c.tenant)), struct{}{})
	}
}

// runTenantChild is a child's part of a tenants lane (see above).
func runTenantChild(ctx context.Context, pl *plan, be *backend, spec childSpec, stdin io.Reader, stdout io.Writer) error {
	lanes := pl.tenantLanes
	i, err := strconv.Atoi(spec.Row)
	if err != nil || i < 0 || i >= len(lanes) {
		return fmt.Errorf("%s: row %q is not a tenants lane", childEnv, spec.Row)
	}
	var mine []call
	for j := spec.Proc; j < len(lanes[i]); j += spec.Procs {
		mine = append(mine, lanes[i][j])
	}
	c := newChatClient(spec.URL, 256)
	defer c.close()
	if err := c.warm(ctx, 32); err != nil {
		return err
	}
	p := pl.p
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stdout, line)
	}
	// The Pacer is made before "ready": the run starts when every child has
	// one.
	ready := func() (time.Time, error) {
		say("ready")
		return awaitStart(stdin, spec.Proc)
	}
	res, err := runTenantLane(ctx, be, c, spec.Budget, p.wall(time.Minute), tenantBurstOf(p), mine, ready, func() { say("done") })
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var rep childReport
	for _, r := range res {
		tc := tenantResult{Tenant: r.tenant, Group: r.group, Wait: r.wait()}
		if r.err != nil {
			tc.Err = r.err.Error()
		}
		rep.Calls = append(rep.Calls, tc)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	say(string(js))
	return nil
}
