package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Bad flag values fail before anything runs, with a message that names the
// flag and says what would be right.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-workers", "0"}, "-workers 0: want 1 to"},
		{[]string{"-jobs", "-3"}, "-jobs -3: want 1 to"},
		{[]string{"-tokens", "1"}, "-tokens 1: want 2 to"},
		{[]string{"-provider-tokens", "0"}, "-provider-tokens 0"},
		{[]string{"-provider-window", "fixed"}, `-provider-window "fixed": want bucket or sliding`},
		{[]string{"-window", "1ms"}, "-window 1ms at -speed 1 is 1ms of wall time"},
		{[]string{"-window", "5s", "-speed", "1000"}, "is 5ms of wall time"},
		{[]string{"-window", "2m"}, "want 10ms to 1m0s"},
		{[]string{"-speed", "0"}, "-speed 0: want"},
		{[]string{"-speed", "NaN"}, "-speed NaN: want"},
		{[]string{"-latency", "-1s"}, "-latency -1s"},
		{[]string{"-retries", "-1"}, "-retries -1"},
		{[]string{"-mode", "all"}, `-mode "all": want per-worker, shared or both`},
		{[]string{"-scenario", "default,nope"}, `-scenario "nope": unknown`},
		{[]string{"-output", "1.5"}, "a token count must be a whole number"},
		{[]string{"-output", "-0.1"}, "must be above zero"},
		{[]string{"-output", "lots"}, "want a fraction"},
		{[]string{"-burst", "0"}, "-burst \"0\": must be above zero"},
		{[]string{"-burst", "150%"}, "at most 100%"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-redis", "redis://127.0.0.1:6379", "-cluster", "127.0.0.1:7000"}, "give one or the other"},
		{[]string{"-redis", "redis://10.1.2.3:6379"}, "only loopback addresses"},
		{[]string{"-redis", "redis.example.com:6379"}, "only loopback addresses"},
		{[]string{"-redis", "ftp://127.0.0.1:21"}, "want redis://127.0.0.1:6379"},
		{[]string{"-cluster", "127.0.0.1"}, "want host:port"},
		{[]string{"-cluster", "127.0.0.1:7000,192.168.1.5:7001"}, "-cluster 192.168.1.5:7001: only loopback"},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseFlags(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}

// Flags that fit no scenario fail in run, before any Redis or provider is
// started.
func TestRunRejectsImpossibleShapes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tokens", "20000"}, "exceeds the provider's limit of 10000 per window"},
		{[]string{"-burst", "500"}, "a burst of 500 tokens cannot hold the largest job (1000 tokens)"},
		{[]string{"-provider-window", "sliding", "-burst", "1"}, "the burst must be below the limit"},
		{[]string{"-scenario", "all", "-window", "100ms"}, "scenario bursty: -window 100ms at -speed 20 is 5ms"},
	} {
		err := run(context.Background(), tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestFlagsAccepted(t *testing.T) {
	o, err := parseFlags([]string{"-scenario", "all", "-output", "40%", "-burst", "2500",
		"-redis", "localhost:6379", "-speed", "10", "-quiet"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags = %v", err)
	}
	if diff := cmp.Diff(scenarioNames(), o.scenarios); diff != "" {
		t.Errorf("-scenario all mismatch (-want +got):\n%s", diff)
	}
	if got := o.params.output.of(800); got != 320 {
		t.Errorf("-output 40%% of 800 = %d, want 320", got)
	}
	if got := o.params.burst.of(10_000); got != 2500 {
		t.Errorf("-burst 2500 of 10,000 = %d, want 2500", got)
	}
	for _, addr := range []string{"127.0.0.1:6379", "[::1]:6379", "localhost:7000", "127.1.2.3:1"} {
		if err := checkLoopback("-cluster", addr); err != nil {
			t.Errorf("checkLoopback(%q) = %v, want nil", addr, err)
		}
	}
	// Flags given override the scenario's defaults; others keep them.
	pl, err := buildPlan("bursty", o)
	if err != nil {
		t.Fatal(err)
	}
	if pl.p.speed != 10 || pl.p.workers != 64 {
		t.Errorf("bursty with -speed 10: speed %v, workers %d; want 10, 64 (its own default)", pl.p.speed, pl.p.workers)
	}
}

// Every shared row's budget matches its provider (NoRefund unless the
// provider refunds), except mixed's rows that show a mismatch; mixed runs
// both kinds of provider unless -provider-refund picks one.
func TestProviderRefundRows(t *testing.T) {
	type row struct {
		Label                    string
		ProviderRefund, NoRefund bool
	}
	for _, tc := range []struct {
		args []string
		want []row
	}{
		{[]string{}, []row{
			{"per-worker limiters, 6 retries", false, false},
			{"shared budget (llmpacer)", false, true},
		}},
		{[]string{"-provider-refund"}, []row{
			{"per-worker limiters, 6 retries", true, false},
			{"shared budget (llmpacer)", true, false},
		}},
		{[]string{"-scenario", "sliding", "-mode", "shared", "-provider-refund"}, []row{
			{"shared, burst = limit", true, false},
			{"shared, sliding-safe burst 1,000", true, false},
			{"shared, exact sliding window", true, false},
		}},
		{[]string{"-scenario", "mixed"}, []row{
			{"no-refund provider, per-worker limiters, 6 retries", false, false},
			{"no-refund provider, shared, NoRefund", false, true},
			{"no-refund provider, shared, refunds", false, false},
			{"refunding provider, shared, refunds", true, false},
			{"refunding provider, shared, NoRefund", true, true},
		}},
		{[]string{"-scenario", "mixed", "-mode", "shared", "-provider-refund"}, []row{
			{"shared, refunds", true, false},
			{"shared, NoRefund", true, true},
		}},
		{[]string{"-scenario", "mixed", "-provider-refund=false"}, []row{
			{"per-worker limiters, 6 retries", false, false},
			{"shared, NoRefund", false, true},
			{"shared, refunds", false, false},
		}},
	} {
		t.Run(strings.Join(append([]string{"args"}, tc.args...), " "), func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if err != nil {
				t.Fatalf("parseFlags = %v", err)
			}
			pl, err := buildPlan(o.scenarios[0], o)
			if err != nil {
				t.Fatalf("buildPlan = %v", err)
			}
			var got []row
			for _, v := range pl.rows {
				cfg, _ := pl.budgetConfig(v)
				got = append(got, row{v.label, v.providerRefund, v.shared && cfg.NoRefund})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rows mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
