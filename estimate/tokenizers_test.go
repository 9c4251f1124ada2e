package estimate

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"
)

var textsOut = flag.String("texts", "", "write textKinds as JSON to this file, for testdata/tokenizers/count.mjs")

// tokenizerFamilies are the real tokenizers testdata/tokenizers/counts.json
// records, each with a model of its family.
var tokenizerFamilies = []struct{ name, model string }{
	{"claude2", "claude-sonnet-4-5"},
	{"gemma3", "gemini-2.5-pro"},
	{"llama3", "llama-3.1-70b-instruct"},
}

// TestFallbackAgainstTokenizers compares the fallback with the real
// tokenizers of three fallback families, counted offline by
// testdata/tokenizers/count.mjs: on every kind of text but base64, what
// the fallback misses is within the input margin a Spend rate reserves by
// default for that family (estimate.InputMargin). Run with -v for the
// ratios in docs/estimate.md.
func TestFallbackAgainstTokenizers(t *testing.T) {
	if *textsOut != "" {
		writeTexts(t, *textsOut)
	}
	b, err := os.ReadFile("testdata/tokenizers/counts.json")
	if err != nil {
		t.Fatal(err)
	}
	var counts []map[string]any
	if err := json.Unmarshal(b, &counts); err != nil {
		t.Fatal(err)
	}
	if len(counts) != len(textKinds) {
		t.Fatalf("counts.json has %d texts, textKinds %d: count them again (see count.mjs)", len(counts), len(textKinds))
	}
	fallback := &Estimator{}
	for i, tc := range textKinds {
		c := counts[i]
		if c["name"] != tc.name {
			t.Fatalf("counts.json's text %d is %v; want %s: count them again (see count.mjs)", i, c["name"], tc.name)
		}
		got := fallback.Text(tc.s)
		line := ""
		for _, f := range tokenizerFamilies {
			n, _ := c[f.name].(float64)
			if n <= 0 {
				t.Fatalf("counts.json: %s has no %s count", tc.name, f.name)
			}
			line += fmt.Sprintf("%s %4.0f (%.2f)  ", f.name, n, float64(got)/n)
			margin := InputMargin(f.model)
			if float64(got)*(1+margin) < n && !tc.under {
				t.Errorf("%s: the fallback counts %d, %s %.0f: more than %s's default margin of %.0f%% under", tc.name, got, f.name, n, f.model, 100*margin)
			}
		}
		t.Logf("%-8s fallback %4d  %s", tc.name, got, line)
	}
}

// writeTexts writes textKinds for count.mjs.
func writeTexts(t *testing.T, path string) {
	type text struct {
		Name string `json:"name"`
		Text string `json:"text"`
	}
	var ts []text
	for _, tc := range textKinds {
		ts = append(ts, text{tc.name, tc.s})
	}
	b, err := json.Marshal(ts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// estimate.InputMargin gives the small margin of an exact count to
// exactly the models this package counts with their own tokenizer.
func TestInputMarginFollowsEncoding(t *testing.T) {
	names := []string{"claude-sonnet-4-5", "us.anthropic.claude-3-5-sonnet-20240620-v1:0", "gemini-2.5-pro",
		"llama-3.1-70b", "mistral-large", "o10", "gpt4", "my-deployment", "", "GPT-4O", "openai:o3-mini",
		"ft:gpt-4o-mini-2024-07-18:org::id", "azure/gpt-35-turbo", "gpt-4.1", "gpt-5.1-codex", "gpt-image-1",
		"gpt-3.5-turbo-instruct", "o1-preview", " gpt-4-turbo ", "gpt-4o-2024-08-06"}
	for _, f := range families {
		names = append(names, f.prefix, f.prefix+"-2024-08-06")
	}
	for _, m := range names {
		exact := encodingFor(m) != CharBased
		if got := InputMargin(m); (got == 0.05) != exact || got != 0.05 && got != 0.25 {
			t.Errorf("estimate.InputMargin(%q) = %v; the encoding is %s, so want %v", m, got, encodingFor(m), map[bool]float64{true: 0.05, false: 0.25}[exact])
		}
	}
}
