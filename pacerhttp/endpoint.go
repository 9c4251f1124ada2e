package pacerhttp

import (
	"net/http"
	"strconv"
	"strings"
)

// api identifies one model-call endpoint the transport paces. Every other
// request passes through unpaced, so recognizing too little costs pacing,
// while recognizing too much would charge the budget for calls that use
// none of it.
type api int

const (
	apiNone              api = iota // not a model call: passed through unpaced
	apiOpenAIChat                   // POST .../chat/completions (OpenAI, Azure OpenAI deployments and /openai/v1/)
	apiOpenAIResponses              // POST .../responses (not GET/DELETE .../responses/{id}, not .../input_items)
	apiOpenAICompletions            // POST .../completions (legacy; not chat/completions)
	apiOpenAIEmbeddings             // POST .../embeddings
	apiAnthropicMessages            // POST .../v1/messages (not count_tokens, not batches)
	apiGeminiGenerate               // POST .../models/{model}:generateContent
	apiGeminiStream                 // POST .../models/{model}:streamGenerateContent
)

// apiNames are the names String prints, in log-friendly snake case.
var apiNames = [...]string{
	apiNone:              "none",
	apiOpenAIChat:        "openai_chat",
	apiOpenAIResponses:   "openai_responses",
	apiOpenAICompletions: "openai_completions",
	apiOpenAIEmbeddings:  "openai_embeddings",
	apiAnthropicMessages: "anthropic_messages",
	apiGeminiGenerate:    "gemini_generate",
	apiGeminiStream:      "gemini_stream",
}

// String returns the endpoint's name for logs, e.g. "openai_chat", or
// "api(n)" for a value outside the set.
func (a api) String() string {
	if a >= 0 && int(a) < len(apiNames) {
		return apiNames[a]
	}
	return "api(" + strconv.Itoa(int(a)) + ")"
}

// recognize says which endpoint r calls, and the model the URL names:
// Gemini's path model or an Azure deployment name, "" otherwise.
//
// It matches the path's suffix on any host, so that proxies, gateways and
// OpenAI-compatible servers (Azure, OpenRouter, vLLM, Gemini's OpenAI
// layer) are paced too; the query string (Azure's api-version, Gemini's
// alt=sse and key) never matters. Only POST creates a model call: GET and
// DELETE on the same paths read or remove stored objects.
func recognize(r *http.Request) (a api, urlModel string) {
	if r == nil || r.URL == nil || r.Method != http.MethodPost {
		return apiNone, ""
	}
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		return apiOpenAIChat, azureDeployment(p)
	case strings.HasSuffix(p, "/completions"):
		return apiOpenAICompletions, azureDeployment(p)
	case strings.HasSuffix(p, "/embeddings"):
		return apiOpenAIEmbeddings, azureDeployment(p)
	case strings.HasSuffix(p, "/responses"):
		// Only the collection itself: POST /responses/{id}/cancel,
		// /responses/input_tokens and /responses/compact have more
		// segments and are not paced.
		return apiOpenAIResponses, azureDeployment(p)
	case strings.HasSuffix(p, "/v1/messages"):
		// The /v1 keeps OpenAI's Assistants POST /threads/{id}/messages,
		// which stores a message and calls no model, out.
		return apiAnthropicMessages, ""
	}
	return geminiPath(p)
}

// azureDeployment returns the deployment name from an Azure OpenAI path
// ".../openai/deployments/{name}/...", or "". Azure bodies usually carry no
// model, so the deployment is the only name the estimator can go by.
func azureDeployment(p string) string {
	const marker = "/deployments/"
	i := strings.LastIndex(p, marker)
	if i < 0 {
		return ""
	}
	name, _, ok := strings.Cut(p[i+len(marker):], "/")
	if !ok {
		return ""
	}
	return name
}

// geminiPath recognizes ".../models/{model}:generateContent" and
// ":streamGenerateContent", on the Gemini API (/v1beta/models/...) and on
// Vertex AI (/v1/projects/.../publishers/google/models/...). Tuned models
// (".../tunedModels/{name}:...") are generate calls too.
func geminiPath(p string) (api, string) {
	slash := strings.LastIndexByte(p, '/')
	if slash < 0 {
		return apiNone, ""
	}
	model, method, ok := strings.Cut(p[slash+1:], ":")
	if !ok || model == "" {
		return apiNone, ""
	}
	parent := p[:slash]
	if !strings.HasSuffix(parent, "/models") && !strings.HasSuffix(parent, "/tunedModels") {
		return apiNone, ""
	}
	switch method {
	case "generateContent":
		return apiGeminiGenerate, model
	case "streamGenerateContent":
		return apiGeminiStream, model
	}
	return apiNone, ""
}

// PathModel returns the model r's URL names for a model call that
// NewTransport paces: a Gemini path's model or an Azure OpenAI deployment;
// "" when the URL names none (the body then names it). A proxy in front
// of the transport uses it to choose the budget of a call whose body has
// no "model".
func PathModel(r *http.Request) string {
	_, m := recognize(r)
	return m
}

// Paced reports whether NewTransport paces r: a POST to a model-call
// endpoint it recognizes (see the package doc). A proxy in front of the
// transport asks it to choose the budget of a model call before sending
// it; every other request passes through unpaced.
func Paced(r *http.Request) bool {
	a, _ := recognize(r)
	return a != apiNone
}
