package pacerhttp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmpacer/llmpacer/estimate"
)

// benchProse is ordinary English for a realistic system prompt.
const benchProse = "You are a careful assistant for a travel company. Answer questions about bookings, " +
	"refunds and schedules in plain language, cite the policy section you rely on, and never invent " +
	"a booking reference. If the customer is upset, acknowledge it once and move on to the fix. "

// benchChatBody is a 2 KB chat body as openai-go sends it: a system
// prompt, a short exchange, a tool call and its result, and one tool.
func benchChatBody(b *testing.B) []byte {
	params := openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(strings.Repeat(benchProse, 4)),
			openai.UserMessage("My flight AB123 on 12 March was cancelled. Can I get a refund to my card?"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_booking", Arguments: `{"flight":"AB123","date":"2025-03-12"}`}},
			}}}},
			openai.ToolMessage(`{"status":"cancelled","fare":"flex","paid_by":"card"}`, "call_1"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_booking", Description: openai.String("Look up a booking by flight and date."), Parameters: weather,
		})},
		MaxCompletionTokens: openai.Int(400),
	}
	body := withStream(b, marshal(b, params))
	if len(body) < 1900 || len(body) > 2300 {
		b.Fatalf("bench body is %d bytes, want about 2 KB", len(body))
	}
	return body
}

// BenchmarkParseRequest measures parseRequest on a 2 KB chat body, beside
// the estimate alone, so the parsing overhead shows.
func BenchmarkParseRequest(b *testing.B) {
	body := benchChatBody(b)
	e := newEst("gpt-4o-mini")
	est := func(string) *estimate.Estimator { return e }
	b.Run("chat-2KB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := parseRequest(apiOpenAIChat, "", body, est); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("estimate-alone", func(b *testing.B) {
		var c chatBody
		if err := json.Unmarshal(body, &c); err != nil {
			b.Fatal(err)
		}
		msgs := make([]estimate.Message, len(c.Messages))
		for i := range c.Messages {
			msgs[i] = c.Messages[i].message()
		}
		tools := []estimate.Tool{c.Tools[0].Function.tool()}
		b.ReportAllocs()
		for b.Loop() {
			promptTokens(e, msgs, tools)
		}
	})
	b.Run("include-usage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			withIncludeUsage(body)
		}
	})
}
