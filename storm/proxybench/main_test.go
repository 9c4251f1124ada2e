package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRun runs the bench small on miniredis and checks that every table
// has a row for every lane and no call failed. No figure is asserted: the
// machine's speed is not the test's business.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	addr := os.Getenv("LLMPACER_REDIS_ADDR") // the real Redis lane too, when there is one
	if err := run(context.Background(), []string{"-redis", addr, "-n", "20", "-streams", "20", "-c", "1,4", "-d", "50ms"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	want := []string{
		"non-streamed call, sending to last byte, 20 rounds", "streamed call, sending to first body byte, 20 rounds",
		"| bare |", "| proxy-miniredis |", "| pacerhttp-miniredis |", "| acquire+bare-miniredis |", "| acquire-miniredis |",
		"| 1 |", "| 4 |", "load average after",
	}
	if addr != "" {
		want = append(want, "| proxy-redis |", "| pacerhttp-redis |", "| acquire+bare-redis |", "| acquire-redis |")
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		left, err := rdb.Keys(context.Background(), fmt.Sprintf("*llmpacer-proxybench-%d:*", os.Getpid())).Result()
		if err != nil || len(left) > 0 {
			t.Errorf("keys left in Redis after the bench: %q (%v); want none", left, err)
		}
	}
	for _, want := range want {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	for _, line := range strings.Split(s, "\n") {
		lane := strings.HasPrefix(line, "| bare") || strings.HasPrefix(line, "| proxy-") || strings.HasPrefix(line, "| pacerhttp-")
		if lane && !strings.HasSuffix(line, " 0 |") || strings.Contains(line, "failed |") && !strings.HasPrefix(line, "| lane") {
			t.Errorf("calls failed: %s", line)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"-redis", "10.1.2.3:6379"},
		{"-redis", "redis.example.com:6379"},
		{"-redis", "127.0.0.1"},
		{"-c", "0"},
		{"-c", "1,x"},
		{"-n", "10"}, {"-streams", "5"},
		{"-d", "0s"},
	} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse(%q) = nil error; want a refusal", args)
		}
	}
	if _, err := parse([]string{"-redis", "127.0.0.1:6390"}); err != nil {
		t.Errorf("parse(a loopback Redis) = %v; want nil", err)
	}
}

// TestTrace traces a few rounds and checks that every step has a row and
// every paced call sent one Redis command, the acquire, before its send.
func TestTrace(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-redis", "", "-trace", "20"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range append(pointNames[1:], "| step | bare | proxy-miniredis | pacerhttp-miniredis | acquire+bare-miniredis |") {
		if !strings.Contains(s, want) {
			t.Errorf("the trace has no %q:\n%s", want, s)
		}
	}
	paced := regexp.MustCompile(` 1 evalsha [0-9a-f]{8}: 20 calls \|`)
	if n := len(paced.FindAllString(s, -1)); n != 3 || !strings.Contains(s, "| Redis commands before the upstream send | 0: 20 calls |") {
		t.Errorf("%d lanes sent one script, the acquire, before each of their 20 sends, and bare none; want the 3 paced lanes:\n%s", n, s)
	}
	if tracing() != nil {
		t.Error("the tracer is still on after the run")
	}
}
