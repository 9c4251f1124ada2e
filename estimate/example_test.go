package estimate_test

import (
	"fmt"

	"github.com/llmpacer/llmpacer/estimate"
)

func ExampleEstimator_Messages() {
	// Build one Estimator per model and reuse it; it is safe for concurrent
	// use, and the BPE table loads on the first count.
	e, err := estimate.New("gpt-4o")
	if err != nil {
		fmt.Println(err)
		return
	}
	msgs := []estimate.Message{
		{Role: "system", Content: "You are a concise assistant."},
		{Role: "user", Content: "Name three prime numbers."},
	}
	// Reserve the prompt (with the 5% margin) plus the max_tokens sent.
	fmt.Println(e.Encoding(), e.Messages(msgs, 256))
	// Output: o200k_base 280
}

func ExampleReserve() {
	msgs := []estimate.Message{{Role: "user", Content: "Summarise the attached report in five bullet points."}}
	// A Claude model has no offline tokenizer, so the reserve comes from
	// the deliberately conservative character count.
	fmt.Println(estimate.Reserve("anthropic:claude-sonnet-4-5", msgs, 1024))
	fmt.Println(estimate.Reserve("openai:gpt-4.1", msgs, 1024))
	// Output:
	// 1052
	// 1043
}

func ExampleEstimator_Estimate() {
	e, err := estimate.New("gpt-4o-mini")
	if err != nil {
		fmt.Println(err)
		return
	}
	n, err := e.Estimate(estimate.Request{
		Messages: []estimate.Message{{Role: "user", Content: "What's the weather in Paris?"}},
		Tools: []estimate.Tool{{
			Name:        "get_weather",
			Description: "Get the current weather for a city.",
			Parameters:  []byte(`{"type":"object","properties":{"city":{"type":"string","description":"City name."}},"required":["city"]}`),
		}},
		MaxOutput: 200,
	})
	fmt.Println(n, err)

	_, err = e.Estimate(estimate.Request{MaxOutput: -1})
	fmt.Println(err)
	// Output:
	// 255 <nil>
	// estimate: invalid request: max output -1 is negative
}
