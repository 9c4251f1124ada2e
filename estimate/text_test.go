package estimate

import (
	"strings"
	"testing"
)

// TestTextExact pins counts published in OpenAI's cookbook (compare_encodings
// and the "tiktoken is great!" example) and a few checked by running tiktoken.
func TestTextExact(t *testing.T) {
	cases := []struct {
		s      string
		cl100k int64
		o200k  int64
	}{
		{"", 0, 0},
		{"hello world", 2, 2},
		{"tiktoken is great!", 6, 6},
		{"antidisestablishmentarianism", 6, 6},
		{"2 + 2 = 4", 7, 7},
		{"お誕生日おめでとう", 9, 8},
	}
	for _, tc := range cases {
		for _, enc := range []struct {
			name string
			want int64
		}{{Cl100kBase, tc.cl100k}, {O200kBase, tc.o200k}} {
			e, err := New("", WithEncoding(enc.name))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := e.Text(tc.s); got != enc.want {
				t.Errorf("%s Text(%q) = %d, want %d", enc.name, tc.s, got, enc.want)
			}
		}
	}
}

func TestTextFallback(t *testing.T) {
	cases := []struct {
		s    string
		want int64
	}{
		{"", 0},
		{"a", 1},
		{"abc", 1},
		{"abcd", 2},
		{"hello world", 4}, // 11 bytes
		{"お誕生日おめでとう", 9},   // 27 bytes: one per character
		{strings.Repeat("x", 3000), 1000},
	}
	for _, tc := range cases {
		e, err := New("claude-sonnet-4-5")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := e.Text(tc.s); got != tc.want {
			t.Errorf("fallback Text(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// textKinds are the kinds of text prompts carry, for the fallback's tests.
var textKinds = []struct {
	name  string
	s     string
	under bool // known to be under-counted
}{
	{"prose", corpusProse, false},
	{"code", corpusCode, false},
	{"diff", corpusDiff, false},
	{"docs", strings.Join(corpusDocs, "\n"), false},
	{"japanese", "お誕生日おめでとう。今日はいい天気ですね。明日は雨が降るそうです。", false},
	{"chinese", "我们的团队正在开发一个新的项目管理工具，预计下个月发布。", false},
	{"russian", "Мы переехали на тарифный план Business во вторник, но трое коллег не видят временную шкалу.", false},
	{"german", "Die Geschwindigkeitsbegrenzung auf der Autobahn wird heftig diskutiert.", false},
	{"emoji", "🎉🎉 launch day! 🚀🔥 thanks team 🙏", false},
	{"numbers", "3.14159 2.71828 1.41421 1234567890 42 1e-9", false},
	{"json", `{"id":17,"name":"widget","tags":["a","b"],"price":9.99}`, false},
	{"csv", "date,region,units,revenue\n2024-01-01,EU,120,3400.50\n2024-01-02,US,98,2810.00\n", false},
	{"uuid", "550e8400-e29b-41d4-a716-446655440000 6ba7b810-9dad-11d1-80b4-00c04fd430c8", false},
	{"sha256", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", false},
	{"indent", "\t\t\t\tif x {\n\t\t\t\t\treturn nil\n\t\t\t\t}\n", false},
	{"base64", "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", true},
}

// TestFallbackCoversBPE checks the fallback's purpose on the kinds of text
// prompts carry: it counts at least as many tokens as o200k, the stand-in
// for an unknown model's tokenizer. Random base64 is the known exception,
// logged but not checked; see the package doc. Run with -v for the ratios.
func TestFallbackCoversBPE(t *testing.T) {
	o200k, err := New("", WithEncoding(O200kBase))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	fallback := &Estimator{}
	for _, tc := range textKinds {
		got, exact := fallback.Text(tc.s), o200k.Text(tc.s)
		byLength := (int64(len(tc.s)) + charBytesPerToken - 1) / charBytesPerToken
		t.Logf("%-8s fallback %4d  o200k %4d  ratio %.2f  (length alone %.2f)",
			tc.name, got, exact, float64(got)/float64(exact), float64(byLength)/float64(exact))
		if got < exact && !tc.under {
			t.Errorf("%s: fallback Text = %d, want >= o200k count %d", tc.name, got, exact)
		}
	}
}

func TestPieceFloor(t *testing.T) {
	cases := []struct {
		s    string
		want int64
	}{
		{"", 0},
		{"hello world", 2},  // " world" absorbs its space
		{"hello  world", 3}, // a run of spaces is a piece
		{"a\nb", 3},         // so is a newline
		{"1234567890", 10},  // one per digit
		{`{"a":1}`, 5},      // {" a ": 1 }: 2 + 1 + 1 + 1 + 1 punctuation pairs rounded up
		{"お誕生日", 4},         // one per CJK character
		{"Привет мир", 2},   // Cyrillic words are words
		{"x🎉y", 3},
	}
	for _, tc := range cases {
		if got := pieceFloor(tc.s); got != tc.want {
			t.Errorf("pieceFloor(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// FuzzText checks that counting never panics, even on invalid UTF-8, and
// that an exact count stays within a small factor of the input size.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "hello world", "\xff\xfe", "<|endoftext|>", "お誕生日", "  \n\t ", "a\x00b"} {
		f.Add(s)
	}
	o200k, _ := New("gpt-4o")
	cl100k, _ := New("gpt-4")
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range []*Estimator{o200k, cl100k, {}} {
			n := e.Text(s)
			// An invalid byte becomes U+FFFD (3 bytes) before BPE, so at
			// most 3 tokens per input byte.
			if n < 0 || n > 3*int64(len(s)) {
				t.Errorf("%s Text(%q) = %d, want 0..%d", e.Encoding(), s, n, 3*len(s))
			}
		}
	})
}
