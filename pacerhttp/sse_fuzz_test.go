package pacerhttp

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// FuzzStreamScanner checks that the scanner never panics, reports no
// negative usage, and reports the same Usage and Failure however the
// bytes are split across Writes: whole, at random offsets, and for short
// inputs one byte at a time.
func FuzzStreamScanner(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "streams", "*"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, tt := range streamTests {
			if filepath.Base(name) == tt.file {
				f.Add(uint8(tt.a), data, uint64(1))
			}
		}
	}
	for _, s := range []string{
		"data: {\"usage\":{\"prompt_tokens\":1}}\r\n\r\n",
		"event: error\rdata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\r\r",
		"[{\"usageMetadata\":{\"promptTokenCount\":1}}\n,\r\n{\"error\":{\"code\":429}}]",
		"{\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}",
		"\xEF\xBB\xBF: c\ndata:[DONE]\n\n",
		"[\"\\\"{\",{\"a\":\"}\\\\\"}]",
	} {
		for a := range apiNames {
			f.Add(uint8(a), []byte(s), uint64(a))
		}
	}
	f.Fuzz(func(t *testing.T, a uint8, data []byte, seed uint64) {
		ap := api(a % uint8(len(apiNames)))
		s := scanner(ap, data)
		u, hasUsage := s.Usage()
		if u.Input < 0 || u.CacheRead < 0 || u.CacheWrite < 0 || u.Cached < 0 || u.Output < 0 || u.Total < 0 {
			t.Errorf("scan(%v, %q) usage %+v has a negative count", ap, data, u)
		}
		if !hasUsage && u != (usage{}) {
			t.Errorf("scan(%v, %q) = %+v without usage reported", ap, data, u)
		}
		rng := rand.New(rand.NewPCG(seed, uint64(len(data))))
		cuts := make([]int, rng.IntN(16))
		for i := range cuts {
			cuts[i] = rng.IntN(len(data) + 1)
		}
		sortInts(cuts)
		same(t, ap, data, s, scanner(ap, data, cuts...), "cut at random")
		if len(data) <= 4096 {
			every := make([]int, len(data))
			for i := range every {
				every[i] = i
			}
			same(t, ap, data, s, scanner(ap, data, every...), "byte by byte")
		}
	})
}

// same fails t unless two scanners of the same bytes report the same
// Usage and the same whole Failure verdict.
func same(t *testing.T, a api, data []byte, whole, split *streamScanner, how string) {
	t.Helper()
	wu, wok := whole.Usage()
	su, sok := split.Usage()
	wv, wf := whole.Failure()
	sv, sf := split.Failure()
	if wu != su || wok != sok || wv != sv || wf != sf {
		t.Errorf("scan(%v, %q) %s = %+v %v %+v %v; whole = %+v %v %+v %v", a, data, how, su, sok, sv, sf, wu, wok, wv, wf)
	}
}
