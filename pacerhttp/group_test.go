package pacerhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// deployment is an OpenAI-style server that records what reaches it and
// answers with status (200: a small chat completion, a stream if asked, or
// an Anthropic message on /v1/messages), failures with body and header.
type deployment struct {
	mu     sync.Mutex
	hits   []string // path and api-key of each request
	status int
	header http.Header
	body   string
	srv    *httptest.Server
}

func newDeployment(t *testing.T, status int) *deployment {
	return newFailingDeployment(t, status, nil, `{"error":{"message":"down","type":"server_error"}}`)
}

// newFailingDeployment is a deployment that answers every call with
// status, header and body.
func newFailingDeployment(t *testing.T, status int, header http.Header, body string) *deployment {
	d := &deployment{status: status, header: header, body: body}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.hits = append(d.hits, r.URL.Path+" "+r.Header.Get("api-key"))
		d.mu.Unlock()
		for k, v := range d.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case d.status != http.StatusOK:
			w.WriteHeader(d.status)
			_, _ = w.Write([]byte(d.body))
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_, _ = w.Write([]byte(`{"id":"m","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`))
		case bytes.Contains(in, []byte(`"stream":true`)):
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n" +
				"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,\"total_tokens\":15}}\n\ndata: [DONE]\n\n"))
		default:
			_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","created":0,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`))
		}
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *deployment) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.hits...)
}

// groupOf returns a FillInOrder group of budgets named after the test,
// one per RPD given, sharing a HashTag.
func groupOf(t *testing.T, b redistest.Backend, rpds ...int64) (*pacer.Group, []*pacer.Pacer, string) {
	return groupObserved(t, b, nil, rpds...)
}

// groupObserved is groupOf with every deployment's events recorded in ev,
// if not nil.
func groupObserved(t *testing.T, b redistest.Backend, ev *events, rpds ...int64) (*pacer.Group, []*pacer.Pacer, string) {
	t.Helper()
	name := redistest.Name(t)
	var ds []pacer.Deployment
	var ps []*pacer.Pacer
	for i, rpd := range rpds {
		cfg := pacer.Config{Name: name + "-" + string(rune('a'+i)), HashTag: name, Limits: pacer.Limits{RPD: rpd}}
		if ev != nil {
			cfg.Observe = ev.observe
		}
		p, err := pacer.New(b.Client(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		ds = append(ds, pacer.Deployment{Pacer: p})
	}
	g, err := pacer.NewGroup(pacer.GroupConfig{Deployments: ds})
	if err != nil {
		t.Fatal(err)
	}
	return g, ps, name
}

// One openai-go client serves two Azure deployments: the calls the first
// has no room for go to the second, with its URL, deployment name and key.
func TestGroupTransportRoutesAzureDeployments(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		east, west := newDeployment(t, 200), newDeployment(t, 200)
		g, ps, _ := groupOf(t, b, 2, 100)
		hc := &http.Client{Transport: pacerhttp.NewGroupTransport(g, map[string]pacerhttp.Target{
			ps[1].Config().Name: {URL: west.srv.URL, AzureDeployment: "gpt4o-west", Header: http.Header{"Api-Key": {"key-west"}}},
		}, nil)}
		client := openai.NewClient(ooption.WithBaseURL(east.srv.URL+"/openai/deployments/gpt4o-east/"),
			ooption.WithHeader("api-key", "key-east"), ooption.WithHTTPClient(hc))
		for i := 0; i < 4; i++ {
			_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:     "gpt-4o",
				Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
				MaxTokens: openai.Int(50),
			})
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		wantEast := "/openai/deployments/gpt4o-east/chat/completions key-east"
		wantWest := "/openai/deployments/gpt4o-west/chat/completions key-west"
		if got := east.got(); len(got) != 2 || got[0] != wantEast || got[1] != wantEast {
			t.Errorf("east got %q; want 2 of %q", got, wantEast)
		}
		if got := west.got(); len(got) != 2 || got[0] != wantWest || got[1] != wantWest {
			t.Errorf("west got %q; want 2 of %q", got, wantWest)
		}
	})
}

// A deployment answering 500 is cooled down for every process, and the
// SDK's retry goes to the next one.
func TestGroupTransportCoolsDownFailingDeployment(t *testing.T) {
	b := redistest.Mini(t)
	down, up := newDeployment(t, http.StatusInternalServerError), newDeployment(t, 200)
	g, ps, tag := groupOf(t, b, 100, 100)
	hc := &http.Client{Transport: pacerhttp.NewGroupTransport(g, map[string]pacerhttp.Target{ps[1].Config().Name: {URL: up.srv.URL}}, nil)}
	client := openai.NewClient(ooption.WithBaseURL(down.srv.URL+"/v1/"), ooption.WithAPIKey("sk"), ooption.WithHTTPClient(hc))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}, MaxTokens: openai.Int(50),
	})
	if err != nil {
		t.Fatalf("call = %v; want the retry's answer from the second deployment", err)
	}
	if len(down.got()) != 1 || len(up.got()) != 1 {
		t.Errorf("requests: %d to the failing deployment, %d to the other; want 1 and 1", len(down.got()), len(up.got()))
	}
	other, err := pacer.New(b.Client(t), pacer.Config{Name: ps[0].Config().Name, HashTag: tag, Limits: pacer.Limits{RPD: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := other.Snapshot(context.Background()); err != nil || s.Paused <= 0 || s.Paused > 5*time.Second {
		t.Errorf("the failing deployment's pause seen by another process = %v, %v; want up to %v", s.Paused, err, 5*time.Second)
	}
}

func TestNewGroupTransportRefuses(t *testing.T) {
	b := redistest.Mini(t)
	g, _, _ := groupOf(t, b, 1)
	for name, rt := range map[string]http.RoundTripper{
		"nil group":      pacerhttp.NewGroupTransport(nil, nil, nil),
		"unknown target": pacerhttp.NewGroupTransport(g, map[string]pacerhttp.Target{"nope": {}}, nil),
	} {
		req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o"}`))
		if _, err := rt.RoundTrip(req); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("%s: RoundTrip() = %v; want ErrInvalid", name, err)
		}
	}
}
