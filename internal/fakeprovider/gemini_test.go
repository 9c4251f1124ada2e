package fakeprovider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/llmpacer/llmpacer/classify"
)

// No Gemini SDK is a dependency here, so these tests decode the answers
// into the shapes of Gemini's REST reference (GenerateContentResponse,
// UsageMetadata, google.rpc.Status) with encoding/json, rejecting unknown
// fields so that a misspelt name fails.

type geminiWant struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
			Role string `json:"role"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
		Index        int64  `json:"index"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		TotalTokenCount         int64 `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

// geminiSeen reads Gemini's usage in the provider's terms: the thoughts
// are output, outside the candidates' count.
func geminiSeen(r geminiWant) usageSeen {
	u := r.UsageMetadata
	return usageSeen{Prompt: u.PromptTokenCount, Output: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CacheRead: u.CachedContentTokenCount, Reasoning: u.ThoughtsTokenCount}
}

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hello gemini"}]}],` +
	`"generationConfig":{"maxOutputTokens":10,"candidateCount":2}}`

// geminiPost sends body to path with the token headers of tk.
func geminiPost(t *testing.T, srv *httptest.Server, path, body string, tk tokens) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = tk.header()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", "test")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func decodeStrict(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}

func TestGeminiGenerateContent(t *testing.T) {
	tk := tokens{prompt: 40, output: 6, cacheRead: 16, reasoning: 2}
	p, srv := startServer(t, Config{Style: Gemini, TokenLimit: 1000})
	resp := geminiPost(t, srv, "/v1beta/models/gemini-2.5-flash:generateContent", geminiBody, tk)
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("generateContent = %d %s, want 200", resp.StatusCode, data)
	}
	var r geminiWant
	decodeStrict(t, data, &r)
	if len(r.Candidates) != 2 || r.Candidates[1].Content.Parts[0].Text != wantText(4) ||
		r.Candidates[1].FinishReason != "STOP" || r.Candidates[1].Content.Role != "model" || r.ModelVersion != "gemini-2.5-flash" {
		t.Errorf("answer = %s, want 2 model candidates of %q, STOP", data, wantText(4))
	}
	u := r.UsageMetadata
	if u.CandidatesTokenCount != 8 || u.ThoughtsTokenCount != 4 || u.TotalTokenCount != 52 {
		t.Errorf("usageMetadata = %+v, want 8 candidates (2 × 4 visible), 4 thoughts, 52 total", *u)
	}
	checkUsage(t, p, GenerateContent, geminiSeen(r))
	if got := p.Stats().TokensAdmitted; got != 40+10*2 {
		t.Errorf("TokensAdmitted = %d, want prompt + maxOutputTokens × candidateCount = 60", got)
	}
	if h := resp.Header.Get("x-ratelimit-remaining-tokens"); h != "" {
		t.Errorf("x-ratelimit-remaining-tokens = %q; Gemini sends no rate-limit headers", h)
	}
}

// readGeminiSSE reads the data events of an alt=sse stream.
func readGeminiSSE(t *testing.T, body io.Reader) ([]geminiWant, error) {
	t.Helper()
	var out []geminiWant
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var r geminiWant
		decodeStrict(t, []byte(data), &r)
		out = append(out, r)
	}
	return out, sc.Err()
}

func TestGeminiStreamGenerateContent(t *testing.T) {
	tk := tokens{prompt: 12, output: 5, reasoning: 1}
	p, srv := startServer(t, Config{Style: Gemini})
	body := strings.Replace(geminiBody, `"candidateCount":2`, `"candidateCount":1`, 1)
	resp := geminiPost(t, srv, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body, tk)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("streamGenerateContent = %d %q, want 200 text/event-stream", resp.StatusCode, ct)
	}
	chunks, err := readGeminiSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for i, c := range chunks {
		text += c.Candidates[0].Content.Parts[0].Text
		if last := i == len(chunks)-1; (c.Candidates[0].FinishReason != "") != last {
			t.Errorf("chunk %d finishReason = %q; want it on the last chunk only", i, c.Candidates[0].FinishReason)
		}
	}
	if text != wantText(4) {
		t.Errorf("streamed text = %q, want %q", text, wantText(4))
	}
	checkUsage(t, p, StreamGenerateContent, geminiSeen(chunks[len(chunks)-1]))

	if err := p.CutStreams(1, 2); err != nil {
		t.Fatal(err)
	}
	resp = geminiPost(t, srv, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body, tk)
	chunks, err = readGeminiSSE(t, resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(chunks) != 2 {
		t.Errorf("cut stream: %d chunks, error %v; want 2 then unexpected EOF", len(chunks), err)
	}
}

// geminiError is google.rpc.Status as Gemini sends it.
type geminiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type       string `json:"@type"`
			RetryDelay string `json:"retryDelay"`
			Violations []struct {
				QuotaMetric     string            `json:"quotaMetric"`
				QuotaID         string            `json:"quotaId"`
				QuotaDimensions map[string]string `json:"quotaDimensions"`
				QuotaValue      string            `json:"quotaValue"`
			} `json:"violations"`
			Links []map[string]string `json:"links"`
		} `json:"details"`
	} `json:"error"`
}

func TestGeminiErrors(t *testing.T) {
	const path = "/v1beta/models/gemini-2.5-flash:generateContent"
	for _, tc := range []struct {
		name      string
		setup     func(p *Provider)
		status    int
		rpc       string
		quotaID   string
		delay     string
		kind      classify.Kind
		retryWait time.Duration
	}{
		{"rate limit", func(p *Provider) { geminiPostDirect(p) }, 429, "RESOURCE_EXHAUSTED",
			"GenerateRequestsPerMinutePerProjectPerModel", "60s", classify.RateLimited, 60 * time.Second},
		{"daily quota", func(p *Provider) { p.StopQuota() }, 429, "RESOURCE_EXHAUSTED",
			"GenerateRequestsPerDayPerProjectPerModel", "12s", classify.QuotaExhausted, 0},
		{"injected 503", func(p *Provider) { _ = p.Fail(1, 503) }, 503, "UNAVAILABLE", "", "", classify.Overloaded, 0},
		{"injected 429", func(p *Provider) { _ = p.Fail(1, 429) }, 429, "RESOURCE_EXHAUSTED",
			"GenerateRequestsPerMinutePerProjectPerModel", "1s", classify.RateLimited, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, srv := startServer(t, Config{Style: Gemini, RequestLimit: 1})
			tc.setup(p)
			resp := geminiPost(t, srv, path, geminiBody, tokens{})
			data, _ := io.ReadAll(resp.Body)
			var e geminiError
			decodeStrict(t, data, &e)
			if resp.StatusCode != tc.status || e.Error.Code != tc.status || e.Error.Status != tc.rpc {
				t.Fatalf("answer = %d %s, want %d %s", resp.StatusCode, data, tc.status, tc.rpc)
			}
			var quotaID, delay string
			for _, d := range e.Error.Details {
				switch d.Type {
				case "type.googleapis.com/google.rpc.QuotaFailure":
					quotaID = d.Violations[0].QuotaID
				case "type.googleapis.com/google.rpc.RetryInfo":
					delay = d.RetryDelay
				}
			}
			if quotaID != tc.quotaID || delay != tc.delay {
				t.Errorf("quotaId %q retryDelay %q, want %q %q", quotaID, delay, tc.quotaID, tc.delay)
			}
			v := classify.FromHTTP(resp.StatusCode, resp.Header, data)
			if v.Kind != tc.kind || (tc.retryWait > 0 && v.RetryAfter != tc.retryWait) {
				t.Errorf("classify.FromHTTP() = %+v, want %v retry after %v", v, tc.kind, tc.retryWait)
			}
		})
	}
}

// geminiPostDirect uses up a one-request limit without a server.
func geminiPostDirect(p *Provider) {
	r := httptest.NewRequest(http.MethodPost, "/v1beta/models/gemini-2.5-flash:generateContent", strings.NewReader(geminiBody))
	p.ServeHTTP(httptest.NewRecorder(), r)
}

func TestGeminiModelsAndRoutes(t *testing.T) {
	p, srv := startServer(t, Config{Style: Gemini})
	resp, err := srv.Client().Get(srv.URL + "/v1beta/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Models) == 0 || list.Models[0].Name != "models/gemini-2.5-flash" {
		t.Errorf("models list = %+v, %v; want models/gemini-2.5-flash first", list, err)
	}
	for _, path := range []string{
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent", // no alt=sse
		"/v1beta/models/gemini-2.5-flash:countTokens",
		"/v1/models/gemini-2.5-flash:generateContent",
	} {
		if resp := geminiPost(t, srv, path, geminiBody, tokens{}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s = %d, want 404", path, resp.StatusCode)
		}
	}
	want := map[Endpoint]EndpointStats{ModelsList: {Calls: 1, OK: 1}, NoEndpoint: {Calls: 3, BadRequests: 3}}
	if diff := cmp.Diff(want, p.Stats().Endpoints); diff != "" {
		t.Errorf("Stats().Endpoints mismatch (-want +got):\n%s", diff)
	}
}
