package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// change is what -json prints for pause, stop and resume: the budget
// before and after.
type change struct {
	Redis  string `json:"redis"`
	Action string `json:"action"`
	Budget string `json:"budget"`
	Before budget `json:"before"`
	After  budget `json:"after"`
}

// act runs pause, stop or resume on the budget named.
func act(ctx context.Context, o options, rdb redis.UniversalClient, where string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	name := o.names[0]
	n, err := budgetKeys(ctx, rdb, o.prefix, name)
	if err != nil {
		return timedOut(ctx, o, err)
	}
	if n == 0 && !o.force {
		hint := ""
		if o.cmd != "resume" {
			hint = "; to " + o.cmd + " it before its first call, add -force"
		}
		return &notFoundError{fmt.Sprintf("no budget %q under prefix %q on %s: llmpacer list shows the budgets there (names are case-sensitive)%s", name, o.prefix, where, hint)}
	}
	p, err := pacer.Open(ctx, rdb, o.prefix, name)
	if errors.Is(err, pacer.ErrInvalid) {
		// No definition stored, or one no process can use. Pause, Stop and
		// Resume change only the budget's pause and stop fields, whatever
		// its definition: a placeholder limit, never written, lets pacer
		// open a budget that has none.
		t, bare := wire.SplitTag(name)
		p, err = pacer.New(rdb, pacer.Config{Name: bare, KeyPrefix: o.prefix, HashTag: t, Limits: pacer.Limits{RPM: 1}})
	}
	if err != nil {
		return timedOut(ctx, o, err)
	}
	r := reader{rdb: rdb, o: o}
	r.o.tenants = 0
	before := r.read(ctx, name, nil)
	switch o.cmd {
	case "pause":
		err = p.Pause(ctx, o.dur)
	case "stop":
		err = p.Stop(ctx, o.dur)
	case "resume":
		err = p.Resume(ctx)
	}
	if err != nil {
		return timedOut(ctx, o, fmt.Errorf("%s %q: %w", o.cmd, name, err))
	}
	after := r.read(ctx, name, nil)
	if o.json {
		return json.NewEncoder(stdout).Encode(change{Redis: where, Action: o.cmd, Budget: name, Before: before, After: after})
	}
	switch o.cmd {
	case "pause":
		fmt.Fprintf(stdout, "paused %q on %s: every caller waits %v more (a pause only grows, and cannot be ended sooner)\n", name, where, secs(after.PausedS))
	case "stop":
		fmt.Fprintf(stdout, "stopped %q on %s: every call is refused (pacer.ErrStopped) for %v; llmpacer resume %s ends it sooner\n", name, where, secs(after.StoppedS), name)
	case "resume":
		switch before.StoppedBy {
		case "quota":
			fmt.Fprintf(stdout, "resumed %q on %s: lifted the quota stop (%v were left); a call the provider still refuses for its quota stops it again\n", name, where, secs(before.StoppedS))
		case "stop":
			fmt.Fprintf(stdout, "resumed %q on %s: ended the operator's stop (%v were left)\n", name, where, secs(before.StoppedS))
		default:
			fmt.Fprintf(stdout, "%q on %s was not stopped: nothing to resume\n", name, where)
		}
		if after.PausedS > 0 {
			fmt.Fprintf(stdout, "note: %q is still paused for %v: a pause cannot be shortened and ends by itself\n", name, secs(after.PausedS))
		}
	}
	if after.Error != "" {
		fmt.Fprintf(stdout, "note: reading %q after the change: %s\n", name, after.Error)
	}
	return nil
}
