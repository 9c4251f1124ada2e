package pacerprom_test

import (
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// t0 is where the tests' miniredis clocks start: a still clock gives exact
// levels, and each advance refills a known amount.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newPacer(t *testing.T, b redistest.Backend, cfg pacer.Config) *pacer.Pacer {
	t.Helper()
	p, err := pacer.New(b.Client(t), cfg)
	if err != nil {
		t.Fatalf("pacer.New(%+v) = %v", cfg, err)
	}
	return p
}

// compare checks the collector's exposition of the named metrics against
// want, through a pedantic registry so that every metric must match a
// described descriptor.
func compare(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	r := prometheus.NewPedanticRegistry()
	if err := r.Register(c); err != nil {
		t.Fatalf("Register() = %v", err)
	}
	if err := testutil.GatherAndCompare(r, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
