package estimate

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestChunksCutsLongSpaceRuns(t *testing.T) {
	long := strings.Repeat(" \n", 100) // 200 bytes of white space
	cases := []struct {
		name string
		s    string
		want []string
	}{
		{"empty", "", []string{""}},
		{"no long run", corpusCode, []string{corpusCode}},
		{"run at the limit", "a" + strings.Repeat(" ", maxSpaceRun) + "b", []string{"a" + strings.Repeat(" ", maxSpaceRun) + "b"}},
		{"run over the limit", "a" + long + "b", []string{
			"a" + long[:64], long[64:128], long[128:192], long[192:] + "b",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			_, _ = chunks(tc.s, func(c string) (int, error) {
				got = append(got, c)
				return 0, nil
			})
			if strings.Join(got, "") != tc.s {
				t.Fatalf("chunks do not add up to the input")
			}
			if len(got) != len(tc.want) {
				t.Fatalf("chunks(%.20q…) made %d chunks, want %d", tc.s, len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("chunk %d = %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestLongSpaceRunsStayFastAndClose checks both halves of the trade: long
// whitespace runs count in linear time, and the chunked count stays within
// a few percent above or below the exact one.
//
// Linear time is checked by what causes it, not by a stopwatch (under -race
// on a loaded machine even the linear count takes seconds): Text gives the
// count of chunks, which hands the codec no piece with a whitespace run
// longer than maxSpaceRun, the runs whose cost grows with the square of
// their length. For three of the units below the unchunked count differs,
// so a Text that stopped chunking would show.
func TestLongSpaceRunsStayFastAndClose(t *testing.T) {
	for _, enc := range []string{O200kBase, Cl100kBase} {
		e, err := New("", WithEncoding(enc))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		c := codecFor(enc)
		e.Text("warm up")
		for _, unit := range []string{" \n", "  \n", "\n\n ", " \n\t", "\r\n"} {
			small := strings.Repeat(unit, 2000/len(unit))
			exact, err := c.codec.Count(small) // unchunked, still fast at 2 KB
			if err != nil {
				t.Fatalf("Count: %v", err)
			}
			got := e.Text(small)
			if d := got - int64(exact); d < -int64(exact)/20 || d > int64(exact)/20+1 {
				t.Errorf("%s Text(%q×%d) = %d, want within 5%% of exact %d", enc, unit, 2000/len(unit), got, exact)
			}

			// 50 KB: unchunked, about 2.5 s without -race.
			big := strings.Repeat(unit, 50_000/len(unit))
			start := time.Now()
			got = e.Text(big)
			took := time.Since(start)
			longest := 0
			want, err := chunks(big, func(p string) (int, error) {
				longest = max(longest, longestSpaceRun(p))
				return c.codec.Count(p)
			})
			if err != nil {
				t.Fatalf("chunks: %v", err)
			}
			if got != int64(want) || longest > maxSpaceRun {
				t.Errorf("%s Text(%q×%d) = %d in %v; want %d, counted in pieces with runs of at most %d bytes (longest %d)",
					enc, unit, 50_000/len(unit), got, took, want, maxSpaceRun, longest)
			}
		}
	}
}

// longestSpaceRun is the length in bytes of the longest whitespace run in s.
func longestSpaceRun(s string) int {
	longest, run := 0, 0
	for _, r := range s {
		if unicode.IsSpace(r) {
			run += utf8.RuneLen(r)
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}
