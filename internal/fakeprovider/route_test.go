package fakeprovider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFindRoute(t *testing.T) {
	for _, tc := range []struct {
		style        Style
		method, path string
		want         Endpoint
		model        string
		status       int // 0: routed
	}{
		{OpenAI, "POST", "/v1/chat/completions", ChatCompletions, "", 0},
		{OpenAI, "POST", "/v1/responses", Responses, "", 0},
		{OpenAI, "POST", "/v1/completions", Completions, "", 0},
		{OpenAI, "POST", "/v1/embeddings", Embeddings, "", 0},
		{OpenAI, "GET", "/v1/models", ModelsList, "", 0},
		{OpenAI, "POST", "/v1/models", ModelsList, "", 405},
		{OpenAI, "GET", "/v1/chat/completions", ChatCompletions, "", 405},
		{OpenAI, "POST", "/openai/deployments/d1/chat/completions?api-version=x", ChatCompletions, "d1", 0},
		{OpenAI, "POST", "/openai/deployments/d1/embeddings?api-version=x", Embeddings, "d1", 0},
		{OpenAI, "POST", "/openai/deployments/d1/chat/completions", ChatCompletions, "d1", 404},
		{OpenAI, "POST", "/openai/responses?api-version=x", Responses, "", 0},
		{OpenAI, "GET", "/openai/models?api-version=x", ModelsList, "", 0},
		{OpenAI, "POST", "/openai/v1/chat/completions", ChatCompletions, "", 0},
		{OpenAI, "POST", "/openai/deployments//chat/completions?api-version=x", NoEndpoint, "", 404},
		{OpenAI, "POST", "/v1/messages", NoEndpoint, "", 404},
		{Anthropic, "POST", "/v1/messages", Messages, "", 0},
		{Anthropic, "GET", "/v1/models", ModelsList, "", 0},
		{Anthropic, "POST", "/v1/chat/completions", NoEndpoint, "", 404},
		{Gemini, "POST", "/v1beta/models/g-1:generateContent", GenerateContent, "g-1", 0},
		{Gemini, "POST", "/v1beta/models/g-1:streamGenerateContent?alt=sse", StreamGenerateContent, "g-1", 0},
		{Gemini, "POST", "/v1beta/models/g-1:streamGenerateContent", NoEndpoint, "", 404},
		{Gemini, "GET", "/v1beta/models", ModelsList, "", 0},
		{Gemini, "POST", "/v1beta/models/:generateContent", NoEndpoint, "", 404},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		rt, e := findRoute(r, tc.style)
		status := 0
		if e != nil {
			status = e.status
		}
		if rt.ep != tc.want || rt.model != tc.model || status != tc.status {
			t.Errorf("%v %s %s: route %q model %q status %d, want %q %q %d",
				tc.style, tc.method, tc.path, rt.ep, rt.model, status, tc.want, tc.model, tc.status)
		}
	}
}

func TestBadBodiesPerEndpoint(t *testing.T) {
	for _, tc := range []struct {
		style      Style
		path, body string
		param      string // OpenAI error.param
	}{
		{OpenAI, "/v1/responses", `{"model":"m"}`, "input"},
		{OpenAI, "/v1/responses", `{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{OpenAI, "/v1/completions", `{"model":"m","prompt":"hi","n":0}`, "n"},
		{OpenAI, "/v1/completions", `{"model":"m","prompt":{"a":1}}`, "prompt"},
		{OpenAI, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"n":500}`, "n"},
		{OpenAI, "/v1/embeddings", `{"model":"m","input":[]}`, "input"},
		{OpenAI, "/v1/embeddings", `{"model":"m","input":"x","encoding_format":"hex"}`, "encoding_format"},
		{Gemini, "/v1beta/models/g:generateContent", `{"contents":[]}`, ""},
		{Gemini, "/v1beta/models/g:generateContent", `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":0}}`, ""},
	} {
		p := newTestProvider(t, Config{Style: tc.style}, newClock())
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body)))
		if w.Code != http.StatusBadRequest {
			t.Errorf("POST %s %s = %d %s, want 400", tc.path, tc.body, w.Code, w.Body)
			continue
		}
		e, _ := decodeMap(t, w.Body.Bytes())["error"].(map[string]any)
		if tc.style == Gemini {
			if e["status"] != "INVALID_ARGUMENT" || e["code"] != 400.0 {
				t.Errorf("POST %s %s: error %v, want INVALID_ARGUMENT 400", tc.path, tc.body, e)
			}
		} else if e["param"] != tc.param {
			t.Errorf("POST %s %s: error.param = %v, want %q", tc.path, tc.body, e["param"], tc.param)
		}
		if s := p.Stats(); s.BadRequests != 1 || s.TokensAdmitted != 0 {
			t.Errorf("POST %s %s: Stats() = %+v, want 1 bad request", tc.path, tc.body, s)
		}
	}
}
