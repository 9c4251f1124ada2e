// Command proxybench measures what `llmpacer proxy` adds to a call: the
// latency of a non-streamed chat call (p50, p99) and the time to the first
// byte of a streamed one, through the proxy and through a bare
// httputil.ReverseProxy to the same simulated provider, the calls of the
// lanes interleaved one by one so that the machine's noise falls on all of
// them alike; the floor, the bare proxy with one Acquire before sending
// and its Settle after the answer (lanes acquire+bare-*); an Acquire with
// no HTTP, on the same Redis, in the same rounds; then calls per second
// through one proxy and through the bare one with N concurrent clients.
//
//	go run ./storm/proxybench                       # miniredis only
//	go run ./storm/proxybench -redis 127.0.0.1:PORT # and a real Redis
//	go run ./storm/proxybench -trace 1000           # where a stream's first byte goes
//
// -trace N times each step of N rounds of streamed calls instead (the
// client's send, the lane's handler, the first Redis command, the upstream
// transport's connection, write and first byte, the provider's handler and
// flush, the first body read, the lane's first write and flush, the
// client's first byte) and prints each step's median, by lane, with the
// Redis commands each call sent before its upstream send.
//
// -redis defaults to $LLMPACER_REDIS_ADDR. Everything listens on loopback,
// and the Redis must be on this machine: the bench writes keys under the
// prefix "llmpacer-proxybench-<pid>" and deletes them when it ends.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	redis   string
	calls   int
	streams int
	clients []int
	dur     time.Duration
	trace   int
}

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("proxybench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.redis, "redis", os.Getenv("LLMPACER_REDIS_ADDR"), "a real Redis on this machine besides miniredis (default $LLMPACER_REDIS_ADDR; empty: miniredis only)")
	fs.IntVar(&o.calls, "n", 2000, "non-streamed calls per lane for the latency percentiles")
	fs.IntVar(&o.streams, "streams", 500, "streamed calls per lane for the time to first byte")
	clients := fs.String("c", "1,8,32", "comma-separated numbers of concurrent clients for calls/s")
	fs.DurationVar(&o.dur, "d", 2*time.Second, "duration of each calls/s run")
	fs.IntVar(&o.trace, "trace", 0, "instead of the tables, trace this many rounds of streamed calls and print the median time of each step of a call, by lane")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1024 {
			return o, fmt.Errorf("-c %q: give numbers of clients from 1 to 1024, comma-separated", *clients)
		}
		o.clients = append(o.clients, n)
	}
	if o.calls < 20 || o.streams < 20 {
		return o, fmt.Errorf("-n %d, -streams %d: give at least 20 of each (2000 for a p99 worth reading)", o.calls, o.streams)
	}
	if o.dur <= 0 {
		return o, fmt.Errorf("-d %v: give a positive duration", o.dur)
	}
	return o, loopback(o.redis)
}

// loopback refuses a Redis that is not on this machine: the bench loads it.
func loopback(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-redis %q: give host:port", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-redis %q: the bench loads the server; give a Redis on loopback (127.0.0.1:PORT)", addr)
	}
	return nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.trace > 0 {
		active.Store(&tracer{byLn: map[string][]*stamps{}})
		defer active.Store(nil)
	}
	s, err := newSetup(ctx, o.redis)
	if err != nil {
		return err
	}
	defer s.close(ctx)
	fmt.Fprintf(out, "load average before: %s\n", loadavg())
	if o.trace > 0 {
		err := s.traceRounds(ctx, out, o.trace, streamBody)
		fmt.Fprintf(out, "load average after: %s\n", loadavg())
		return err
	}
	if err := s.latency(ctx, out, o.calls); err != nil {
		return err
	}
	if err := s.firstByte(ctx, out, o.streams); err != nil {
		return err
	}
	if err := s.throughput(ctx, out, o.clients, o.dur); err != nil {
		return err
	}
	fmt.Fprintf(out, "load average after: %s\n", loadavg())
	return nil
}

// loadavg is the machine's load average over 1, 5 and 15 minutes.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
