package estimate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// scenario is one realistic request for the estimate-to-real report.
type scenario struct {
	name  string
	msgs  []Message
	tools []Tool
}

// scenarios returns the report's requests: a short chat turn, a RAG prompt
// with a long context, a tool-calling exchange and a code review.
func scenarios() []scenario {
	ragContext := "Knowledge base excerpts:\n\n" + strings.Join(corpusDocs, "\n\n")
	weather := cookbookTools[0]
	search := Tool{
		Name:        "search_orders",
		Description: "Find a customer's orders by status and date range.",
		Parameters: []byte(`{"type":"object","properties":{` +
			`"customer_id":{"type":"string","description":"The customer's id, e.g. cus_123."},` +
			`"status":{"type":"string","description":"Order status.","enum":["open","shipped","returned"]},` +
			`"since":{"type":"string","description":"Earliest order date, YYYY-MM-DD."}},` +
			`"required":["customer_id"]}`),
	}
	return []scenario{
		{
			name: "short chat turn",
			msgs: []Message{
				{Role: "system", Content: "You are a concise assistant. Answer in one or two sentences."},
				{Role: "user", Content: "What's the difference between a mutex and a semaphore?"},
			},
		},
		{
			name: "RAG, long context",
			msgs: []Message{
				{Role: "system", Content: corpusProse[:strings.Index(corpusProse, "Customer question:")]},
				{Role: "user", Parts: []string{ragContext, corpusProse[strings.Index(corpusProse, "Customer question:"):]}},
			},
		},
		{
			name:  "tool-calling exchange",
			tools: []Tool{weather, search},
			msgs: []Message{
				{Role: "system", Content: "You are a shop assistant. Use the tools to look up orders; never guess order details."},
				{Role: "user", Content: "Did my order from last week ship yet? My customer id is cus_48213."},
				{Role: "assistant", ToolCalls: []ToolCall{{
					ID: "call_Qm3bX9k2LpV7sT1aZ8yR4nWd", Name: "search_orders",
					Arguments: `{"customer_id":"cus_48213","since":"2025-06-02"}`,
				}}},
				{Role: "tool", ToolCallID: "call_Qm3bX9k2LpV7sT1aZ8yR4nWd",
					Content: `[{"order_id":"ord_9921","status":"shipped","shipped_at":"2025-06-05","carrier":"DHL","tracking":"JD014600006287364921"},{"order_id":"ord_9930","status":"open","items":2}]`},
				{Role: "assistant", Content: "Your order ord_9921 shipped on June 5 with DHL (tracking JD014600006287364921). Order ord_9930 is still open."},
				{Role: "user", Content: "Great, and what about the second one, when will that go out?"},
			},
		},
		{
			name: "code review",
			msgs: []Message{
				{Role: "system", Content: "You are a senior Go reviewer. Point out bugs, races and unclear code in the diff, citing file and line. Be brief."},
				{Role: "user", Content: "Please review this change to invoice issuing.\n\n" + corpusDiff + "\n\nFor context, the cache package it uses:\n\n" + corpusCode},
			},
		},
	}
}

// TestEstimateVsReal prints the report in docs/estimate.md: the prompt estimate
// (default margin, no max output) against the prompt tokens counted the
// OpenAI way with the exact encoding. For the fallback, o200k stands in for
// the unknown model's tokenizer. Run it with -v to see the table.
func TestEstimateVsReal(t *testing.T) {
	models := []struct {
		model string
		real  tokenizer.Encoding
		lo    float64 // bounds on estimate/real
		hi    float64
	}{
		{"gpt-4o", tokenizer.O200kBase, 1, 1.15},
		{"gpt-4", tokenizer.Cl100kBase, 1, 1.15},
		{"claude-sonnet-4-5", tokenizer.O200kBase, 1, 3},
	}
	var b strings.Builder
	fmt.Fprintln(&b, "| scenario | model | encoding | real | estimate | ratio |")
	fmt.Fprintln(&b, "|---|---|---|---:|---:|---:|")
	for _, sc := range scenarios() {
		for _, m := range models {
			e, err := New(m.model)
			if err != nil {
				t.Fatalf("New(%q): %v", m.model, err)
			}
			est, err := e.Estimate(Request{Messages: sc.msgs, Tools: sc.tools})
			if err != nil {
				t.Fatalf("Estimate(%s): %v", sc.name, err)
			}
			real := openAITokens(t, m.real, sc.msgs, sc.tools)
			ratio := float64(est) / float64(real)
			enc := e.Encoding()
			if e.Fallback() {
				enc += " vs " + string(m.real)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %.3f |\n", sc.name, m.model, enc, real, est, ratio)
			if ratio < m.lo || ratio > m.hi {
				t.Errorf("%s on %s: estimate %d / real %d = %.3f, want %.2f..%.2f", sc.name, m.model, est, real, ratio, m.lo, m.hi)
			}
		}
	}
	t.Log("\n" + b.String())
}
