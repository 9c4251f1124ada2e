package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/llmpacer/llmpacer/estimate"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/openai/openai-go/v3"
)

// clientKind says what sends a row's calls.
type clientKind int

const (
	// clientRaw is the storm's own chatClient, behind per-worker limiters
	// or retry.Run.
	clientRaw clientKind = iota
	// clientSDK is openai-go with its default retries and no pacing: what
	// a user has before adding anything.
	clientSDK
	// clientTransport is openai-go with its default retries through
	// pacerhttp.NewTransport, one Pacer per worker on the shared budget.
	clientTransport
)

// sdkModel is the model the SDK rows name. pacerhttp estimates their
// prompts with its tokenizer (o200k).
const sdkModel = openai.ChatModelGPT4oMini

// sdkJobs returns n jobs of the params' size, as uniformJobs does, each
// with a prompt text whose estimate (what pacerhttp reserves for it) is at
// most a quarter of the job. The job's prompt is that estimate, and its
// max_tokens the rest of the job: the provider then charges exactly what
// the transport reserves, and the floor is that of uniformJobs.
func sdkJobs(p params, n int) []job {
	e, err := estimate.New(string(sdkModel))
	if err != nil {
		panic(fmt.Sprintf("storm: estimate.New(%q): %v", sdkModel, err)) // a known model: cannot happen
	}
	text := promptText(e, max(p.tokens/4, 1))
	prompt := promptEstimate(e, text)
	maxTok := max(p.tokens-prompt, 1)
	out := p.output.of(maxTok)
	jobs := make([]job, n)
	for i := range jobs {
		jobs[i] = job{prompt: prompt, maxTokens: maxTok, output: out, priority: pacer.Interactive, text: text}
	}
	return jobs
}

// promptEstimate is what pacerhttp reserves for a chat request's prompt of
// one user message: package estimate's count, margin included.
func promptEstimate(e *estimate.Estimator, text string) int64 {
	n, err := e.Estimate(estimate.Request{Messages: []estimate.Message{{Role: "user", Content: text}}})
	if err != nil {
		return e.Messages([]estimate.Message{{Role: "user", Content: text}}, 0)
	}
	return n
}

// promptText returns the longest prompt of repeated words whose estimate
// is at most want tokens (one word if even that is over).
func promptText(e *estimate.Estimator, want int64) string {
	words := func(k int64) string {
		b := make([]byte, 0, 8*k)
		for i := range k {
			b = append(b, promptWords[i%int64(len(promptWords))]...)
		}
		return string(b)
	}
	lo, hi := int64(1), max(want, 1) // a word is at least one token
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if promptEstimate(e, words(mid)) <= want {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return words(lo)
}

var promptWords = []string{"Summarise ", "the ", "incident ", "report ", "for ", "the ", "on-call ", "engineer. "}

func buildSDK(pl *plan, _ *rand.Rand) {
	pl.jobs = sdkJobs(pl.p, pl.p.jobs)
	pl.sdkOnly = true
}

// buildStream runs uniform jobs as streams whose answers use 40% of
// max_tokens, against a provider that refunds the rest (see the stream
// scenario's defaults): the budget then refunds too, and the Ended events'
// Used is each stream's real usage, which the transport read from it.
func buildStream(pl *plan, _ *rand.Rand) {
	pl.jobs = sdkJobs(pl.p, pl.p.jobs)
	pl.sdkOnly, pl.stream = true, true
}

// sdkVariants are the rows of a scenario made of openai-go rows only: the
// SDK alone (the per-worker side: each worker on its own, as without any
// limiter) and through the transport (the shared side), with and without
// header sync, which costs a Redis call per answer and has no outside
// caller to find here. A stream scenario adds the transport without
// include_usage, whose streams then report no usage.
func (pl *plan) sdkVariants(mode string, burst int64) []variant {
	var rows []variant
	refund := pl.p.providerRefund
	if mode != "shared" {
		rows = append(rows, variant{label: "openai-go, " + pl.sdkRetries() + ", no pacing", client: clientSDK, providerRefund: refund})
	}
	if mode != "per-worker" {
		// The budget that matches the provider, as in every scenario.
		match := variant{shared: true, burst: burst, providerRefund: refund, noRefund: !refund}
		rows = append(rows, pl.transportRow(match))
		{
			v := pl.transportRow(match)
			v.label, v.noHeaderSync = v.label+", WithHeaderSync(false)", true
			rows = append(rows, v)
		}
		if pl.stream {
			v := pl.transportRow(match)
			v.label, v.noIncludeUsage = v.label+", WithIncludeUsage(false)", true
			rows = append(rows, v)
		}
	}
	return rows
}

// transportRow is the shared row v sent by openai-go through the transport.
func (pl *plan) transportRow(v variant) variant {
	v.client, v.label = clientTransport, "openai-go through pacerhttp, "+pl.sdkRetries()
	return v
}

// sdkRetries says which retries the SDK rows keep: openai-go's default
// (2) unless -retries sets them.
func (pl *plan) sdkRetries() string {
	if pl.set["retries"] {
		return fmt.Sprintf("%d SDK retries", pl.p.retries)
	}
	return "default retries"
}
