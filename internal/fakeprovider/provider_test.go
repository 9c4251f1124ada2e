package fakeprovider

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero value", Config{}, false},
		{"storm", Config{TokenLimit: 10_000, Window: 5 * time.Second}, false},
		{"negative tokens", Config{TokenLimit: -1}, true},
		{"negative requests", Config{RequestLimit: -1}, true},
		{"negative window", Config{Window: -time.Second}, true},
		{"negative latency", Config{Latency: -time.Second}, true},
		{"negative quota", Config{QuotaTokens: -1}, true},
		{"unknown mode", Config{Mode: Mode(7)}, true},
		{"unknown style", Config{Style: Style(9)}, true},
		{"overflow", Config{TokenLimit: math.MaxInt64 / 2, Window: time.Hour}, true},
	} {
		_, err := New(tc.cfg)
		if gotErr := err != nil; gotErr != tc.wantErr {
			t.Errorf("%s: New(%+v) error = %v, want error %v", tc.name, tc.cfg, err, tc.wantErr)
		}
	}
	p, err := New(Config{})
	if err != nil || p.cfg.Window != time.Minute {
		t.Errorf("New(Config{}) window = %v, %v; want 1m0s, nil", p.cfg.Window, err)
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{TokenBucket.String(), "TokenBucket"}, {SlidingWindow.String(), "SlidingWindow"}, {Mode(5).String(), "Mode(5)"},
		{OpenAI.String(), "OpenAI"}, {Anthropic.String(), "Anthropic"}, {Gemini.String(), "Gemini"}, {Style(5).String(), "Style(5)"},
	} {
		if tc.got != tc.want {
			t.Errorf("String() = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestSuccessBodies(t *testing.T) {
	const body = `{"model":"m1","messages":[{"role":"user","content":"abcdefghi"},` +
		`{"role":"user","content":[{"type":"text","text":"xyz"}]}],"max_tokens":5}`
	for _, tc := range []struct {
		name  string
		style Style
		hdr   []string
		want  map[string]any
	}{
		{"openai estimate", OpenAI, nil, map[string]any{
			"id": "chatcmpl-fake000001", "object": "chat.completion", "created": float64(newClock().Now().Unix()), "model": "m1",
			"choices": []any{map[string]any{"index": float64(0), "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": "the quick brown fox jumps"}}},
			// 12 bytes of text is 3 tokens.
			"usage": openAIUsageMap(3, 5, 0, 0)}},
		{"openai truncated", OpenAI, []string{PromptTokensHeader, "40", OutputTokensHeader, "9"}, map[string]any{
			"id": "chatcmpl-fake000001", "object": "chat.completion", "created": float64(newClock().Now().Unix()), "model": "m1",
			"choices": []any{map[string]any{"index": float64(0), "finish_reason": "length", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": "the quick brown fox jumps"}}},
			"usage": openAIUsageMap(40, 5, 0, 0)}},
		{"anthropic short", Anthropic, []string{OutputTokensHeader, "2"}, map[string]any{
			"id": "msg_fake000001", "type": "message", "role": "assistant", "model": "m1",
			"content":     []any{map[string]any{"type": "text", "text": "the quick"}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": float64(3), "output_tokens": float64(2),
				"cache_creation_input_tokens": float64(0), "cache_read_input_tokens": float64(0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProvider(t, Config{Style: tc.style}, newClock())
			w := post(p, tc.style, body, tc.hdr...)
			if w.Code != http.StatusOK {
				t.Fatalf("POST = %d %s, want 200", w.Code, w.Body)
			}
			if diff := cmp.Diff(tc.want, decodeMap(t, w.Body.Bytes())); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
			if got := w.Result().Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
		})
	}
}

func TestQuotaExhaustionSticks(t *testing.T) {
	for _, tc := range []struct {
		style  Style
		status int
		want   map[string]any
	}{
		{OpenAI, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"type": "insufficient_quota", "code": "insufficient_quota", "param": nil,
			"message": "You exceeded your current quota, please check your plan and billing details. " +
				"For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."}}},
		{Anthropic, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{
			"type":    "invalid_request_error",
			"message": "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}},
	} {
		t.Run(tc.style.String(), func(t *testing.T) {
			clk := newClock()
			p := newTestProvider(t, Config{QuotaTokens: 2500, TokenLimit: 100_000, Style: tc.style}, clk)
			for i := range 3 { // used 0, 1000, 2000 < 2500: all admitted
				if w := job(p, tc.style, 1000); w.Code != http.StatusOK {
					t.Fatalf("job %d = %d %s, want 200", i, w.Code, w.Body)
				}
			}
			for _, wait := range []time.Duration{0, time.Hour, 30 * 24 * time.Hour} {
				clk.Advance(wait)
				w := job(p, tc.style, 1)
				if w.Code != tc.status {
					t.Fatalf("after %v: job = %d %s, want %d", wait, w.Code, w.Body, tc.status)
				}
				if diff := cmp.Diff(tc.want, decodeMap(t, w.Body.Bytes())); diff != "" {
					t.Errorf("after %v: body mismatch (-want +got):\n%s", wait, diff)
				}
				if got := w.Result().Header.Get("retry-after"); got != "" {
					t.Errorf("after %v: retry-after = %q, want none", wait, got)
				}
			}
			if got := p.Stats().QuotaErrors; got != 3 {
				t.Errorf("Stats().QuotaErrors = %d, want 3", got)
			}
		})
	}
}

func TestFail(t *testing.T) {
	for _, tc := range []struct {
		style    Style
		status   int
		wantType string
	}{
		{OpenAI, http.StatusInternalServerError, "server_error"},
		{OpenAI, http.StatusServiceUnavailable, "server_error"},
		{OpenAI, http.StatusTooManyRequests, "requests"},
		{Anthropic, 529, "overloaded_error"},
		{Anthropic, http.StatusInternalServerError, "api_error"},
	} {
		p := newTestProvider(t, Config{Style: tc.style, TokenLimit: 1000}, newClock())
		if err := p.Fail(2, tc.status); err != nil {
			t.Fatalf("Fail(2, %d) error = %v", tc.status, err)
		}
		for i := range 2 {
			w := job(p, tc.style, 10)
			if w.Code != tc.status {
				t.Fatalf("%v call %d = %d, want %d", tc.style, i, w.Code, tc.status)
			}
			m := decodeMap(t, w.Body.Bytes())
			if got := m["error"].(map[string]any)["type"]; got != tc.wantType {
				t.Errorf("%v %d: error.type = %v, want %s", tc.style, tc.status, got, tc.wantType)
			}
		}
		if w := job(p, tc.style, 10); w.Code != http.StatusOK {
			t.Errorf("%v call after faults = %d, want 200", tc.style, w.Code)
		}
		if s := p.Stats(); s.Faults != 2 || s.OK != 1 || s.TokensAdmitted != 10 {
			t.Errorf("Stats() = %+v, want 2 faults, 1 OK, 10 tokens (faults charge nothing)", s)
		}
	}
	p := newTestProvider(t, Config{}, nil)
	for _, tc := range []struct{ n, status int }{{-1, 500}, {1, 200}, {1, 600}} {
		if err := p.Fail(tc.n, tc.status); err == nil {
			t.Errorf("Fail(%d, %d) error = nil, want an error", tc.n, tc.status)
		}
	}
}

func TestBadInput(t *testing.T) {
	valid := chatBody(OpenAI, 10, false)
	for _, tc := range []struct {
		name, method, path, body string
		style                    Style
		hdr                      []string
		status                   int
		param                    any // OpenAI error.param
	}{
		{"garbage json", "POST", openAIPath, "{not json", OpenAI, nil, 400, nil},
		{"trailing garbage", "POST", openAIPath, valid + "x", OpenAI, nil, 400, nil},
		{"negative max_tokens", "POST", openAIPath, strings.Replace(valid, `"max_tokens":10`, `"max_tokens":-5`, 1), OpenAI, nil, 400, "max_tokens"},
		{"zero max_completion_tokens", "POST", openAIPath, strings.Replace(valid, `"max_tokens":10`, `"max_completion_tokens":0`, 1), OpenAI, nil, 400, "max_completion_tokens"},
		{"no model", "POST", openAIPath, strings.Replace(valid, `"model":"gpt-4o",`, "", 1), OpenAI, nil, 400, "model"},
		{"no messages", "POST", openAIPath, `{"model":"m","max_tokens":1}`, OpenAI, nil, 400, "messages"},
		{"content not text", "POST", openAIPath, `{"model":"m","messages":[{"role":"user","content":5}]}`, OpenAI, nil, 400, "messages[0].content"},
		{"bad prompt header", "POST", openAIPath, valid, OpenAI, []string{PromptTokensHeader, "abc"}, 400, nil},
		{"negative output header", "POST", openAIPath, valid, OpenAI, []string{OutputTokensHeader, "-1"}, 400, nil},
		{"unknown path", "POST", "/v1/edits", valid, OpenAI, nil, 404, nil},
		{"other style's path", "POST", anthropicPath, valid, OpenAI, nil, 404, nil},
		{"GET", "GET", openAIPath, "", OpenAI, nil, 405, nil},
		{"anthropic no max_tokens", "POST", anthropicPath, `{"model":"c","messages":[{"role":"user","content":"hi"}]}`, Anthropic, nil, 400, nil},
		{"anthropic negative max_tokens", "POST", anthropicPath, `{"model":"c","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}`, Anthropic, nil, 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProvider(t, Config{Style: tc.style, TokenLimit: 1000}, newClock())
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				r.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.status)
			}
			m := decodeMap(t, w.Body.Bytes())
			e, _ := m["error"].(map[string]any)
			if tc.style == OpenAI {
				if _, ok := e["message"].(string); !ok || e["param"] != tc.param || (tc.status == 400 && e["type"] != "invalid_request_error") {
					t.Errorf("error = %v, want an invalid_request_error with param %v", e, tc.param)
				}
			} else if m["type"] != "error" || e["type"] != "invalid_request_error" {
				t.Errorf("body = %v, want an Anthropic invalid_request_error", m)
			}
			if got := w.Result().Header.Get("x-ratelimit-remaining-tokens") + w.Result().Header.Get("anthropic-ratelimit-tokens-remaining"); got != "1000" {
				t.Errorf("remaining tokens header = %q, want 1000 on every answer", got)
			}
			if s := p.Stats(); s.BadRequests != 1 || s.Calls != 1 || s.TokensAdmitted != 0 {
				t.Errorf("Stats() = %+v, want 1 bad request, nothing admitted", s)
			}
		})
	}
}

func TestLatency(t *testing.T) {
	p := newTestProvider(t, Config{Latency: 50 * time.Millisecond}, nil)
	start := time.Now()
	if w := job(p, OpenAI, 1); w.Code != http.StatusOK {
		t.Fatalf("job = %d, want 200", w.Code)
	}
	if got := time.Since(start); got < 50*time.Millisecond {
		t.Errorf("call took %v, want >= 50ms", got)
	}

	// A client that gives up during the latency gets nothing, but the call
	// stays charged, as with a real provider.
	p = newTestProvider(t, Config{LatencyFunc: func(Usage) time.Duration { return time.Hour }}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, openAIPath, strings.NewReader(chatBody(OpenAI, 7, false)))
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if w.Body.Len() != 0 {
		t.Errorf("cancelled call wrote %q, want nothing", w.Body)
	}
	if s := p.Stats(); s.OK != 1 || s.TokensAdmitted != 9 {
		t.Errorf("Stats() = %+v, want the cancelled call admitted and charged 2+7 tokens", s)
	}
}
