package estimate

import (
	"errors"
	"math"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

func TestMarginOf(t *testing.T) {
	cases := []struct {
		n, bp, want int64
	}{
		{0, 500, 0},
		{1, 500, 1},   // 0.05 rounds up to a whole token
		{20, 500, 1},  // exactly 1
		{21, 500, 2},  // 1.05 rounds up
		{100, 500, 5}, // exactly 5, not 6: integer math has no 5.000000001
		{124, 500, 7}, // 6.2
		{1000, 0, 0},  // no margin
		{1000, 10000, 1000},
		{math.MaxInt64, 10000, math.MaxInt64},
	}
	for _, tc := range cases {
		if got := marginOf(tc.n, tc.bp); got != tc.want {
			t.Errorf("marginOf(%d, %d) = %d, want %d", tc.n, tc.bp, got, tc.want)
		}
	}
}

func TestMessagesAddsMarginAndOutput(t *testing.T) {
	e, err := New("gpt-4o") // default 5% margin
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// The cookbook conversation is 124 prompt tokens on gpt-4o; 5% of 124
	// is 6.2, rounded up to 7.
	cases := []struct {
		maxOutput int64
		want      int64
	}{
		{0, 131},
		{500, 631},
		{-1, 131}, // Messages clamps; Estimate rejects
		{math.MaxInt64, math.MaxInt64},
	}
	for _, tc := range cases {
		if got := e.Messages(cookbookMessages, tc.maxOutput); got != tc.want {
			t.Errorf("Messages(cookbook, %d) = %d, want %d", tc.maxOutput, got, tc.want)
		}
	}
	if got, want := Reserve("gpt-4o", cookbookMessages, 500), int64(631); got != want {
		t.Errorf("Reserve(gpt-4o, cookbook, 500) = %d, want %d", got, want)
	}
}

func TestEstimateValidates(t *testing.T) {
	e, err := New("gpt-4o")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cases := []struct {
		name string
		req  Request
	}{
		{"negative max output", Request{Messages: cookbookMessages, MaxOutput: -1}},
		{"invalid tool JSON", Request{Tools: []Tool{{Name: "f", Parameters: []byte(`{"properties":`)}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Estimate(tc.req)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("Estimate() = %d, %v, want error matching ErrInvalidRequest", got, err)
			}
		})
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	cases := []struct {
		name string
		opt  Option
	}{
		{"negative margin", WithMargin(-0.01)},
		{"margin above 1", WithMargin(1.5)},
		{"NaN margin", WithMargin(math.NaN())},
		{"unknown encoding", WithEncoding("p50k_base")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New("gpt-4o", tc.opt)
			if !errors.Is(err, ErrInvalidOption) || e != nil {
				t.Errorf("New() = %v, %v, want nil, error matching ErrInvalidOption", e, err)
			}
		})
	}
}

func TestZeroEstimator(t *testing.T) {
	var e Estimator
	if got := e.Encoding(); got != CharBased {
		t.Errorf("zero Estimator Encoding() = %q, want %q", got, CharBased)
	}
	if !e.Fallback() {
		t.Errorf("zero Estimator Fallback() = false, want true")
	}
	// One "user" message saying "hi": 3 + ceil(4/3) + ceil(2/3), plus 3
	// priming, no margin.
	if got, want := e.Messages([]Message{{Role: "user", Content: "hi"}}, 10), int64(3+2+1+3+10); got != want {
		t.Errorf("zero Estimator Messages() = %d, want %d", got, want)
	}
}

// TestMessagesCoverOpenAICount checks the promise the pacer relies on: for
// a known model the reserve's prompt part is never below the prompt tokens
// counted the OpenAI way, and the margin keeps it within 15% above.
func TestMessagesCoverOpenAICount(t *testing.T) {
	for _, sc := range scenarios() {
		for _, m := range []struct {
			model string
			enc   tokenizer.Encoding
		}{{"gpt-4o", tokenizer.O200kBase}, {"gpt-4", tokenizer.Cl100kBase}} {
			t.Run(sc.name+"/"+m.model, func(t *testing.T) {
				e, err := New(m.model)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				got, err := e.Estimate(Request{Messages: sc.msgs, Tools: sc.tools})
				if err != nil {
					t.Fatalf("Estimate: %v", err)
				}
				real := openAITokens(t, m.enc, sc.msgs, sc.tools)
				if got < real || float64(got) > 1.15*float64(real) {
					t.Errorf("Estimate() = %d, want within [%d, %.0f] (OpenAI count %d)", got, real, 1.15*float64(real), real)
				}
			})
		}
	}
}

func TestPartsAndToolCallsCount(t *testing.T) {
	e, err := New("gpt-4o", WithMargin(0))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	whole := e.Messages([]Message{{Role: "user", Content: "hello world"}}, 0)
	parts := e.Messages([]Message{{Role: "user", Parts: []string{"hello", " world"}}}, 0)
	if parts != whole {
		t.Errorf("Messages(parts) = %d, want %d, the same as one content string", parts, whole)
	}
	call := ToolCall{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}
	with := e.Messages([]Message{{Role: "assistant", ToolCalls: []ToolCall{call}}}, 0)
	without := e.Messages([]Message{{Role: "assistant"}}, 0)
	want := perToolCall + e.Text(call.ID) + e.Text(call.Name) + e.Text(call.Arguments)
	if got := with - without; got != want {
		t.Errorf("tool call adds %d tokens, want %d", got, want)
	}
}

// TestNestedSchemaCounted checks that schema parts the cookbook has no rule
// for are counted rather than dropped.
func TestNestedSchemaCounted(t *testing.T) {
	e, err := New("gpt-4o", WithMargin(0))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	flat := Tool{Name: "f", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"array"}}}`)}
	nested := Tool{Name: "f", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"string"}}}}}}`)}
	f, err := e.Estimate(Request{Tools: []Tool{flat}})
	if err != nil {
		t.Fatalf("Estimate(flat): %v", err)
	}
	n, err := e.Estimate(Request{Tools: []Tool{nested}})
	if err != nil {
		t.Fatalf("Estimate(nested): %v", err)
	}
	if n <= f {
		t.Errorf("Estimate(nested) = %d, want more than Estimate(flat) = %d", n, f)
	}
}

func TestFallbackToolPreamble(t *testing.T) {
	e, err := New("claude-sonnet-4-5", WithMargin(0))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	without := e.Messages(cookbookToolMessages, 0)
	with, err := e.Estimate(Request{Messages: cookbookToolMessages, Tools: cookbookTools})
	if err != nil {
		t.Fatalf("Estimate: %v", err)
	}
	if got := with - without; got < 530 {
		t.Errorf("fallback tools add %d tokens, want at least the 530-token tool-use preamble", got)
	}
}
