package classify

import (
	"net/http"
	"strings"
)

// Provider names a Verdict can carry.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderAzure     = "azure"
	ProviderGemini    = "gemini"
	ProviderBedrock   = "bedrock"
)

// guessProvider names who answered, from the headers first (they survive an
// HTML error page) and the body's shape second. Azure is checked before
// OpenAI because Azure OpenAI copies OpenAI's body and x-ratelimit headers.
func guessProvider(h http.Header, env envelope) string {
	switch {
	case hasHeaderPrefix(h, "Anthropic-"):
		return ProviderAnthropic
	case h.Get("X-Ms-Region") != "", h.Get("Apim-Request-Id") != "",
		h.Get("X-Ms-Retry-After-Ms") != "", h.Get("Azureml-Model-Session") != "",
		h.Get("X-Ms-Client-Request-Id") != "":
		return ProviderAzure
	case h.Get("X-Amzn-Errortype") != "", hasHeaderPrefix(h, "X-Amzn-Bedrock-"):
		return ProviderBedrock
	case hasHeaderPrefix(h, "Openai-"):
		return ProviderOpenAI
	case env.rootType == "error" && env.errType != "":
		return ProviderAnthropic // {"type":"error","error":{"type":...}}
	case env.awsType != "":
		return ProviderBedrock
	case env.rpcStatus != "":
		return ProviderGemini // {"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}
	case env.hint != "":
		return env.hint
	case h.Get("X-Ratelimit-Limit-Requests") != "", h.Get("X-Ratelimit-Limit-Tokens") != "":
		return ProviderOpenAI
	case env.errType != "" || env.errCode != "":
		return ProviderOpenAI // {"error":{"type":..,"code":..}} is OpenAI's shape
	}
	return ""
}

// hasHeaderPrefix reports whether any header name starts with prefix, which
// must be in canonical form.
func hasHeaderPrefix(h http.Header, prefix string) bool {
	for k := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), prefix) {
			return true
		}
	}
	return false
}

// hostHints maps API host fragments, as they appear in SDK error texts
// ("POST \"https://api.openai.com/v1/...\": 429"), to providers. Azure
// OpenAI's host also contains "openai", so Azure is listed first.
var hostHints = []struct{ fragment, provider string }{
	{".azure.com", ProviderAzure},
	{"api.openai.com", ProviderOpenAI},
	{"api.anthropic.com", ProviderAnthropic},
	{"generativelanguage.googleapis.com", ProviderGemini},
	{"aiplatform.googleapis.com", ProviderGemini},
	{"bedrock", ProviderBedrock},
	{"Bedrock", ProviderBedrock},
}

// providerFromText guesses the provider from an error text.
func providerFromText(s string) string {
	for _, h := range hostHints {
		if strings.Contains(s, h.fragment) {
			return h.provider
		}
	}
	return ""
}
