package fakeprovider

import (
	"net/http"
	"strings"
)

// Endpoint names one kind of call a Provider serves, whatever the path it
// came by: an Azure OpenAI deployment path and OpenAI's own path are the
// same Endpoint.
type Endpoint string

// The endpoints, named after the API method they imitate.
const (
	// ChatCompletions is OpenAI's POST /v1/chat/completions.
	ChatCompletions Endpoint = "chat.completions"
	// Responses is OpenAI's POST /v1/responses.
	Responses Endpoint = "responses"
	// Completions is OpenAI's legacy POST /v1/completions.
	Completions Endpoint = "completions"
	// Embeddings is OpenAI's POST /v1/embeddings. It has no output tokens.
	Embeddings Endpoint = "embeddings"
	// ModelsList is GET /v1/models (OpenAI, Anthropic) or GET
	// /v1beta/models (Gemini). It is answered whatever the limits, the
	// quota and the faults, and charges nothing: it is the call a pacing
	// transport must pass through untouched.
	ModelsList Endpoint = "models"
	// Messages is Anthropic's POST /v1/messages.
	Messages Endpoint = "messages"
	// GenerateContent is Gemini's POST /v1beta/models/{model}:generateContent.
	GenerateContent Endpoint = "generateContent"
	// StreamGenerateContent is Gemini's POST
	// /v1beta/models/{model}:streamGenerateContent?alt=sse.
	StreamGenerateContent Endpoint = "streamGenerateContent"
	// NoEndpoint counts requests for a path the Provider does not serve.
	NoEndpoint Endpoint = ""
)

// route is where a request is going.
type route struct {
	ep    Endpoint
	model string // from the path: Gemini's model, Azure's deployment
	azure bool
}

// paced reports whether calls to the endpoint are admitted against the
// limits, the quota and the faults.
func (r route) paced() bool { return r.ep != ModelsList && r.ep != NoEndpoint }

// openAIOps are the operations under /v1/ (OpenAI) and /openai/... (Azure).
var openAIOps = map[string]Endpoint{
	"chat/completions": ChatCompletions,
	"responses":        Responses,
	"completions":      Completions,
	"embeddings":       Embeddings,
	"models":           ModelsList,
}

// findRoute maps the request's path to an endpoint of the style. It
// returns an error for an unknown path, a wrong method or, on Azure's
// dated paths, a missing api-version.
func findRoute(r *http.Request, style Style) (route, *apiError) {
	var rt route
	switch style {
	case Anthropic:
		rt = anthropicRoute(r.URL.Path)
	case Gemini:
		rt = geminiRoute(r.URL.Path, r.URL.Query().Get("alt"))
	default:
		rt = openAIRoute(r.URL.Path)
	}
	if rt.ep == NoEndpoint {
		return rt, notFound(style, r.Method, r.URL.Path)
	}
	if want := rt.method(); r.Method != want {
		return rt, methodNotAllowed(style, r.Method, r.URL.Path, want)
	}
	if rt.azure && r.URL.Query().Get("api-version") == "" && !strings.HasPrefix(r.URL.Path, "/openai/v1/") {
		// Azure's dated API answers a call without a version with a 404.
		return rt, &apiError{status: http.StatusNotFound, kind: "invalid_request_error",
			code: "404", message: "Resource not found: the api-version query parameter is required"}
	}
	return rt, nil
}

// method is the HTTP method the endpoint takes.
func (r route) method() string {
	if r.ep == ModelsList {
		return http.MethodGet
	}
	return http.MethodPost
}

// openAIRoute knows OpenAI's /v1/{op} and Azure OpenAI's
// /openai/deployments/{deployment}/{op}, /openai/{op} (what openai-go's
// azure package sends for the operations it does not route by
// deployment, such as responses) and /openai/v1/{op}.
func openAIRoute(path string) route {
	if op, ok := strings.CutPrefix(path, "/v1/"); ok {
		return route{ep: openAIOps[op]}
	}
	rest, ok := strings.CutPrefix(path, "/openai/")
	if !ok {
		return route{}
	}
	if op, ok := strings.CutPrefix(rest, "v1/"); ok {
		return route{ep: openAIOps[op], azure: true}
	}
	if d, ok := strings.CutPrefix(rest, "deployments/"); ok {
		name, op, ok := strings.Cut(d, "/")
		if !ok || name == "" || op == "models" {
			return route{}
		}
		return route{ep: openAIOps[op], model: name, azure: true}
	}
	return route{ep: openAIOps[rest], azure: true}
}

// anthropicRoute knows /v1/messages and /v1/models.
func anthropicRoute(path string) route {
	switch path {
	case "/v1/messages":
		return route{ep: Messages}
	case "/v1/models":
		return route{ep: ModelsList}
	}
	return route{}
}

// geminiRoute knows /v1beta/models, /v1beta/models/{model}:generateContent
// and /v1beta/models/{model}:streamGenerateContent, which must ask for
// alt=sse: without it Gemini streams one JSON array, which this simulator
// does not write.
func geminiRoute(path, alt string) route {
	rest, ok := strings.CutPrefix(path, "/v1beta/models")
	switch {
	case !ok:
		return route{}
	case rest == "":
		return route{ep: ModelsList}
	}
	model, method, ok := strings.Cut(strings.TrimPrefix(rest, "/"), ":")
	if !ok || model == "" || strings.Contains(model, "/") {
		return route{}
	}
	switch {
	case method == "generateContent":
		return route{ep: GenerateContent, model: model}
	case method == "streamGenerateContent" && alt == "sse":
		return route{ep: StreamGenerateContent, model: model}
	}
	return route{}
}
