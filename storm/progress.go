package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// progress prints a line on stderr every second while a row runs: the
// scenario and mode, jobs done, 429s so far, time. On a terminal the line
// rewrites itself; elsewhere (a log file, CI) it prints one line a second.
// -quiet hides it. It never writes to stdout, so -json stays parseable.
type progress struct {
	w     io.Writer // nil when quiet
	tty   bool
	every time.Duration

	done atomic.Int64

	mu   sync.Mutex
	stop chan struct{}
	wg   sync.WaitGroup
}

func newProgress(stderr io.Writer, quiet bool) *progress {
	p := &progress{every: time.Second}
	if quiet {
		return p
	}
	p.w = stderr
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// begin starts reporting a row of total jobs; rec counts the 429s.
func (p *progress) begin(scenario, label string, total int, rec *recorder) {
	p.done.Store(0)
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop = make(chan struct{})
	stop, start := p.stop, time.Now()
	p.wg.Go(func() {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				if p.tty {
					fmt.Fprint(p.w, "\r\033[K")
				}
				return
			case <-t.C:
				line := fmt.Sprintf("storm: %s, %s: %d/%d jobs, %d 429s, %.0fs",
					scenario, label, p.done.Load(), total, rec.rateLimited.Load(), time.Since(start).Seconds())
				if p.tty {
					fmt.Fprint(p.w, "\r\033[K"+line)
				} else {
					fmt.Fprintln(p.w, line)
				}
			}
		}
	})
}

// jobDone counts a finished job.
func (p *progress) jobDone() { p.done.Add(1) }

// end stops the line of the current row.
func (p *progress) end() {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
}
