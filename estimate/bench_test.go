package estimate

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tiktoken-go/tokenizer/codec"
)

// BenchmarkText measures counting speed per encoding on a ~2 KB English
// prompt and a ~2 KB Go snippet, reporting tokens/s (the encoding's own
// count) alongside bytes/s.
func BenchmarkText(b *testing.B) {
	inputs := []struct{ name, s string }{
		{"prose", corpusProse},
		{"code", corpusCode},
	}
	for _, enc := range []string{O200kBase, Cl100kBase, CharBased} {
		e, err := New("", WithEncoding(enc))
		if err != nil {
			b.Fatalf("New: %v", err)
		}
		e.Text("warm up") // load the BPE table outside the timed loop
		for _, in := range inputs {
			b.Run(enc+"/"+in.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(in.s)))
				var tokens int64
				for b.Loop() {
					tokens += e.Text(in.s)
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}

// BenchmarkEstimate measures a whole reserve for each report scenario, the
// cost a caller pays per LLM request.
func BenchmarkEstimate(b *testing.B) {
	for _, model := range []string{"gpt-4o", "claude-sonnet-4-5"} {
		e, err := New(model)
		if err != nil {
			b.Fatalf("New: %v", err)
		}
		e.Text("warm up")
		for _, sc := range scenarios() {
			req := Request{Messages: sc.msgs, Tools: sc.tools, MaxOutput: 1024}
			b.Run(model+"/"+sc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := e.Estimate(req); err != nil {
						b.Fatalf("Estimate: %v", err)
					}
				}
			})
		}
	}
}

// BenchmarkSpaceRun shows why chunks exists: counting a 20 KB whitespace
// run with line breaks, cut at maxSpaceRun and uncut.
func BenchmarkSpaceRun(b *testing.B) {
	s := strings.Repeat(" \n", 10_000)
	e, err := New("", WithEncoding(O200kBase))
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	e.Text("warm up")
	b.Run("chunked", func(b *testing.B) {
		for b.Loop() {
			e.Text(s)
		}
	})
	b.Run("unchunked", func(b *testing.B) {
		for b.Loop() {
			if _, err := o200kCodec.codec.Count(s); err != nil {
				b.Fatalf("Count: %v", err)
			}
		}
	})
}

// TestFirstLoadCost logs what the first count with each encoding costs:
// building its vocabulary map. The map is built once per process, so the
// figures mean something only in a fresh process that loaded nothing yet:
//
//	go test -count=1 -run TestFirstLoadCost -v ./estimate
func TestFirstLoadCost(t *testing.T) {
	for _, enc := range []struct {
		name string
		load func() *codec.Codec
	}{{O200kBase, codec.NewO200kBase}, {Cl100kBase, codec.NewCl100kBase}} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		l := &lazyCodec{load: enc.load}
		if _, err := l.count("warm up"); err != nil {
			t.Fatalf("count: %v", err)
		}
		took := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		t.Logf("%s: first count %v, live heap %+.1f MB", enc.name, took.Round(time.Millisecond),
			float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1e6)
		runtime.KeepAlive(l)
	}
}
