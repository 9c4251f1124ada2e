// Command llmpacer shows and steers the llmpacer budgets kept on a Redis:
// each limit's level, the calls in flight, any pause or stop, and the
// busiest tenants; and it pauses, stops or resumes a budget by hand.
//
//	llmpacer                          list every budget (under -prefix)
//	llmpacer show NAME...             the budgets named
//	llmpacer -watch -interval 5s      list again every 5 s, until Ctrl-C
//	llmpacer -json show NAME          one JSON document (a line per refresh with -watch)
//	llmpacer pause -for 30s NAME      every caller waits 30 s (a pause only grows)
//	llmpacer stop -for 1h NAME        every call is refused for an hour
//	llmpacer resume NAME              end a stop: an operator's, or a quota stop
//	llmpacer proxy -listen 127.0.0.1:8080
//	                                  a pacing reverse proxy for any client (see docs/proxy.md)
//
// NAME is the budget's Config.Name. A budget with a Config.HashTag (a
// pacer.Group's deployments, on a Redis Cluster) is listed and named
// {HASHTAG}NAME, the way its keys begin: llmpacer show '{gpt-4o}azure-eu'.
//
// Install it with go install github.com/llmpacer/llmpacer/cmd/llmpacer@latest.
//
// # Connecting
//
// The Redis comes from the environment: LLMPACER_REDIS_URL for one server
// (redis://[user:password@]host:port[/db], or rediss:// for TLS), or
// LLMPACER_REDIS_CLUSTER for a cluster (comma-separated seed nodes, each
// host:port or a URL; the first URL's scheme and credentials apply to
// all). LLMPACER_REDIS_USERNAME and LLMPACER_REDIS_PASSWORD give
// credentials apart from the URL, and LLMPACER_REDIS_CA_FILE a PEM file of
// the certificate authorities that a rediss:// server's certificate is
// checked against (the system's by default). The -redis and -cluster flags
// name an address in place of the environment's, but never credentials: a
// password on a command line is kept in shell history and shown by ps, so
// one there is refused.
//
// Reading works against any host. Pausing, stopping or resuming a budget on
// a Redis that is not on loopback also needs -allow-remote, each time: the
// address comes from an environment that outlives the command, and a shell
// left pointing at production must not brake production by accident.
//
// # What it reads
//
// Budgets are found by one SCAN of the keys under -prefix, with a hash tag
// or without (never KEYS, which
// blocks Redis), cut after -scan keys with a note saying so. A budget whose
// definition is stored in Redis (pacer.Pacer.Define, or a Config with a
// Version) shows each limit's level out of its capacity; without one the
// raw state shows only how long each bucket needs to fill again. Tenants
// are known by the hash of their id that names their key: up to
// -tenant-scan of them are read, and the -tenants with the least room
// left are shown.
//
// # Exit codes
//
//	0  done
//	1  Redis failed or refused, or a budget could not be read
//	2  usage: a bad flag or argument, credentials on the command line,
//	   no Redis given, or a change to a remote Redis without -allow-remote
//	3  show, pause, stop or resume named a budget with no keys (see -force)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// The exit codes: see the package doc.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNotFound = 3
)

func main() {
	// go-redis logs failed dials from its pool on its own; the command
	// reports every error itself, once, with what to do.
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: it parses args, connects to the Redis that
// env (os.Getenv) and the flags name, does what args ask and returns the
// exit code. Output goes to stdout, errors and notes to stderr.
func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "proxy" {
		return runProxy(ctx, args[1:], env, stderr)
	}
	o, err := parseArgs(args, stderr)
	if err != nil {
		return report(stderr, err)
	}
	rdb, where, err := connect(o, env, stderr)
	if err != nil {
		return report(stderr, err)
	}
	defer rdb.Close()
	if err := ping(ctx, o, rdb, where); err != nil {
		return report(stderr, err)
	}
	warnEviction(ctx, o, rdb, where, stderr)
	switch o.cmd {
	case "list", "show":
		err = look(ctx, o, rdb, where, stdout, stderr)
	default:
		err = act(ctx, o, rdb, where, stdout)
	}
	return report(stderr, err)
}

// ping checks that Redis answers, so that an address, TLS or credentials
// problem is reported as one before any work.
func ping(ctx context.Context, o options, rdb redis.UniversalClient, where string) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot use the Redis at %s: %w (check the address, TLS and credentials)", where, err)
	}
	return nil
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// report prints err, if any, and returns its exit code.
func report(stderr io.Writer, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintln(stderr, "llmpacer:", err)
	return exitCode(err)
}
