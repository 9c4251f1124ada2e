package fakeprovider

import (
	"context"
	"net/http"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// openai-go's azure package would pull the Azure SDK into go.mod, and it
// only rewrites the request: chat, completions and embeddings go to
// /openai/deployments/{model}/..., other operations (responses, models) to
// /openai/..., all with ?api-version=; the v1 API is /openai/v1/... with
// none. These tests send the same requests with plain openai-go options.

const azureVersion = "2024-10-21"

// azureCall makes one call of each paced OpenAI endpoint and returns the
// model each answer names.
func azureCalls(t *testing.T, chat, other *openai.Client) map[Endpoint]string {
	t.Helper()
	ctx := context.Background()
	got := map[Endpoint]string{}
	c, err := chat.Chat.Completions.New(ctx, chatParams(4, 1))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	got[ChatCompletions] = c.Model
	tc, err := chat.Completions.New(ctx, completionParams(4, 1))
	if err != nil {
		t.Fatalf("completions: %v", err)
	}
	got[Completions] = tc.Model
	e, err := chat.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("abcd")}})
	if err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	got[Embeddings] = e.Model
	r, err := other.Responses.New(ctx, responseParams(4))
	if err != nil {
		t.Fatalf("responses: %v", err)
	}
	got[Responses] = r.Model
	return got
}

func TestAzurePaths(t *testing.T) {
	t.Run("deployments", func(t *testing.T) {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		opts := []option.RequestOption{option.WithQuery("api-version", azureVersion), option.WithHeader("api-key", "test")}
		models := azureCalls(t, openaiClient(srv, "/openai/deployments/my-gpt/", opts...), openaiClient(srv, "/openai/", opts...))
		want := map[Endpoint]string{ChatCompletions: "my-gpt", Completions: "my-gpt", Embeddings: "my-gpt", Responses: "gpt-4o-mini"}
		for ep, m := range want {
			if models[ep] != m {
				t.Errorf("%s answered for model %q, want %q (the deployment names the model)", ep, models[ep], m)
			}
			if es := endpointStats(p, ep); es.OK != 1 {
				t.Errorf("Stats().Endpoints[%s] = %+v, want 1 OK", ep, es)
			}
		}
	})
	t.Run("v1", func(t *testing.T) {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		c := openaiClient(srv, "/openai/v1/")
		azureCalls(t, c, c)
		if s := p.Stats(); s.OK != 4 || s.BadRequests != 0 {
			t.Errorf("Stats() = %+v, want 4 OK", s)
		}
	})
	t.Run("no api-version", func(t *testing.T) {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		_, err := openaiClient(srv, "/openai/deployments/my-gpt/").Chat.Completions.New(context.Background(), chatParams(4, 1))
		if v := classify.FromError(err); v.Status != http.StatusNotFound || v.Kind != classify.Permanent {
			t.Errorf("classify.FromError(%v) = %+v, want a permanent 404", err, v)
		}
		if es := endpointStats(p, ChatCompletions); es.Calls != 1 || es.BadRequests != 1 {
			t.Errorf("Stats().Endpoints[chat] = %+v, want 1 bad request", es)
		}
	})
}

// TestModelsListPassesThrough checks that the models list answers whatever
// the faults, the quota and the limits, and charges nothing.
func TestModelsListPassesThrough(t *testing.T) {
	ctx := context.Background()
	for _, style := range []Style{OpenAI, Anthropic} {
		t.Run(style.String(), func(t *testing.T) {
			p, srv := startServer(t, Config{Style: style, TokenLimit: 100, RequestLimit: 1})
			if err := sdkCall(style, srv); err != nil { // uses up the request limit
				t.Fatal(err)
			}
			p.StopQuota()
			if err := p.Fail(1, 500); err != nil {
				t.Fatal(err)
			}
			var resp *http.Response
			var first string
			if style == Anthropic {
				page, err := anthropicClient(srv, tokens{}).Models.List(ctx, anthropic.ModelListParams{})
				if err != nil {
					t.Fatalf("Models.List() error = %v", err)
				}
				first = page.Data[0].ID
			} else {
				page, err := openaiClient(srv, "/v1/").Models.List(ctx, option.WithResponseInto(&resp))
				if err != nil {
					t.Fatalf("Models.List() error = %v", err)
				}
				first = page.Data[0].ID
				if got := resp.Header.Get("x-ratelimit-remaining-requests"); got != "0" {
					t.Errorf("x-ratelimit-remaining-requests = %q, want 0: the list carries the limits' headers", got)
				}
			}
			if first != listed[style][0] {
				t.Errorf("first model = %q, want %q", first, listed[style][0])
			}
			s := p.Stats()
			if es := s.Endpoints[ModelsList]; es.Calls != 1 || es.OK != 1 || s.Faults != 0 || s.QuotaErrors != 0 || s.TokensAdmitted != 8+2 {
				t.Errorf("Stats() = %+v, want the list answered, no fault or quota error used, nothing charged", s)
			}
		})
	}
}
