package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

const (
	chatBody   = `{"model":"gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":"hello"}]}`
	streamBody = `{"model":"gpt-4o-mini","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hello"}]}`
)

// call sends one chat call on l and reads its whole answer. It returns the
// time from sending to the last byte, and to the first byte of the body.
func (l lane) call(ctx context.Context, body string) (total, first time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, "POST", l.base+"/openai/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", l.name, err)
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return 0, 0, fmt.Errorf("%s: first byte: %w", l.name, err)
	}
	first = time.Since(start)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, fmt.Errorf("%s: body: %w", l.name, err)
	}
	total = time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s: status %d", l.name, resp.StatusCode)
	}
	return total, first, nil
}

// acquire times one Acquire on st's bare pacer, then settles it untimed.
func (st store) acquire(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	l, err := st.pacer.Acquire(ctx, pacer.Request{Tokens: 16})
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("acquire on %s: %w", st.kind, err)
	}
	return d, l.Settle(ctx, 16)
}

// rounds runs n rounds; each round calls every lane once, then times an
// Acquire on every store. It returns each lane's and each store's times.
func (s *setup) rounds(ctx context.Context, n int, body string, pick func(total, first time.Duration) time.Duration) (got map[string][]time.Duration, failed map[string]int, err error) {
	got, failed = map[string][]time.Duration{}, map[string]int{}
	for _, l := range s.lanes { // warm the connections; teach the budgets their limits
		if _, _, err := l.call(ctx, body); err != nil {
			return nil, nil, err
		}
	}
	before := map[string]int64{}
	for _, st := range s.stores {
		before[st.kind] = st.cmds.n.Load()
	}
	order := s.order()
	for range n {
		for _, j := range order() {
			l := s.lanes[j]
			total, first, err := l.call(ctx, body)
			if err != nil {
				// Counted and shown, not timed: one failed call must not
				// throw away a run, and must not go unseen either.
				failed[l.name]++
				fmt.Fprintf(s.log, "%v\n", err)
				continue
			}
			got[l.name] = append(got[l.name], pick(total, first))
		}
		for _, st := range s.stores {
			d, err := st.acquire(ctx)
			if err != nil {
				return nil, nil, err
			}
			got["acquire-"+st.kind] = append(got["acquire-"+st.kind], d)
		}
	}
	for _, st := range s.stores {
		s.perCall[st.kind] = float64(st.cmds.n.Load()-before[st.kind]) / float64(n)
	}
	return got, failed, nil
}

// order returns the lanes' order for each round in turn: a new shuffle
// each round, the same sequence every run, so that no lane always goes
// first, nor always follows the same lane, whose background work (a
// settle, a header sync) may still be running when the next call begins.
func (s *setup) order() func() []int {
	r := rand.New(rand.NewPCG(22, 1))
	return func() []int { return r.Perm(len(s.lanes)) }
}

// pct is the q-quantile of sorted durations (nearest rank).
func pct(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)) }

// table prints p50, p90 and p99 of each lane and store, and each proxy's
// excess over bare at the same quantile.
func (s *setup) table(out io.Writer, title string, got map[string][]time.Duration, failed map[string]int) {
	fmt.Fprintf(out, "\n%s, µs\n| lane | p50 | p90 | p99 | p50 − bare | p99 − bare | p50 − acquire+bare | Redis commands per call | failed |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", title)
	for _, v := range got {
		slices.Sort(v)
	}
	bare := got["bare"]
	names := []string{}
	for _, l := range s.lanes {
		names = append(names, l.name)
	}
	for _, st := range s.stores {
		names = append(names, "acquire-"+st.kind)
	}
	for _, name := range names {
		v := got[name]
		if len(v) == 0 {
			fmt.Fprintf(out, "| %s | | | | | | | | %d |\n", name, failed[name])
			continue
		}
		d50, d99, dFloor, cmds := "", "", "", ""
		if name != "bare" && !strings.HasPrefix(name, "acquire-") && len(bare) > 0 {
			d50, d99 = us(pct(v, 0.5)-pct(bare, 0.5)), us(pct(v, 0.99)-pct(bare, 0.99))
		}
		// The proxy's and pacerhttp's own cost: over the floor of one
		// Acquire on the same Redis.
		_, kind, _ := strings.Cut(name, "-")
		if floor := got["acquire+bare-"+kind]; len(floor) > 0 && (strings.HasPrefix(name, "proxy-") || strings.HasPrefix(name, "pacerhttp-")) {
			dFloor = us(pct(v, 0.5) - pct(floor, 0.5))
		}
		if kind, ok := strings.CutPrefix(name, "proxy-"); ok {
			cmds = fmt.Sprintf("%.2f", s.perCall[kind])
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", name, us(pct(v, 0.5)), us(pct(v, 0.9)), us(pct(v, 0.99)), d50, d99, dFloor, cmds, failed[name])
	}
}

// latency: a non-streamed call, sending to last byte.
func (s *setup) latency(ctx context.Context, out io.Writer, n int) error {
	got, failed, err := s.rounds(ctx, n, chatBody, func(total, _ time.Duration) time.Duration { return total })
	if err != nil {
		return err
	}
	s.table(out, fmt.Sprintf("non-streamed call, sending to last byte, %d rounds", n), got, failed)
	return nil
}

// firstByte: a streamed call, sending to the first byte of the body.
func (s *setup) firstByte(ctx context.Context, out io.Writer, n int) error {
	got, failed, err := s.rounds(ctx, n, streamBody, func(_, first time.Duration) time.Duration { return first })
	if err != nil {
		return err
	}
	s.table(out, fmt.Sprintf("streamed call, sending to first body byte, %d rounds", n), got, failed)
	return nil
}

// throughput: calls/s on each lane with c clients calling back to back,
// each lane run twice, in one order then the reverse.
func (s *setup) throughput(ctx context.Context, out io.Writer, clients []int, d time.Duration) error {
	fmt.Fprintf(out, "\nnon-streamed calls/s, %v per run, two runs per lane (in order, then reversed)\n| clients |", d)
	for _, l := range s.lanes {
		fmt.Fprintf(out, " %s |", l.name)
	}
	fmt.Fprintf(out, "\n|---:|%s\n", strings.Repeat("---:|", len(s.lanes)))
	for _, c := range clients {
		rate, fails := make([][2]float64, len(s.lanes)), make([]int64, len(s.lanes))
		for r := range 2 {
			for j := range s.lanes {
				if r == 1 {
					j = len(s.lanes) - 1 - j
				}
				v, f := s.lanes[j].rate(ctx, c, d)
				rate[j][r], fails[j] = v, fails[j]+f
			}
		}
		fmt.Fprintf(out, "| %d |", c)
		for j, v := range rate {
			fmt.Fprintf(out, " %.0f (%.0f, %.0f)", (v[0]+v[1])/2, v[0], v[1])
			if fails[j] > 0 {
				fmt.Fprintf(out, ", %d failed", fails[j])
			}
			fmt.Fprint(out, " |")
		}
		fmt.Fprintln(out)
	}
	return nil
}

// rate is the calls/s c clients complete on l in d, and the calls that
// failed meanwhile (not counted in the rate).
func (l lane) rate(ctx context.Context, c int, d time.Duration) (float64, int64) {
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, _, err := l.call(ctx, chatBody); err != nil {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds(), failed.Load()
}
