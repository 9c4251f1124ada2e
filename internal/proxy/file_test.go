package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const heldKey = "sk-held-PROVIDERkey-0123456789"

// fileEnv is the environment the test's configuration files read.
var fileEnv = map[string]string{"HELD": heldKey, "TEAM_A": "pk-team-a", "TEAM_B": "pk-team-b"}

// loadFile writes text to a file and loads it.
func loadFile(t *testing.T, text string) (proxy.File, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "proxy.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return proxy.LoadFile(path, func(k string) string { return fileEnv[k] })
}

// keysSeen records the Authorization headers the provider receives.
type keysSeen struct {
	mu   sync.Mutex
	seen map[string]int
	h    http.Handler
}

func (k *keysSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	k.seen[r.Header.Get("Authorization")]++
	k.mu.Unlock()
	k.h.ServeHTTP(w, r)
}

// TestTenantProxyKeys has two clients spend the provider key the proxy
// holds, each with its own proxy key: the provider sees only the held
// key, each client is charged to its tenant, and one tenant past its own
// limit is held back while the other still gets its turns.
func TestTenantProxyKeys(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		f, err := loadFile(t, `{"keys": [{"provider": "openai", "key_env": "HELD", "share": 0.5,
			"tenant_limits": {"rpm": 2},
			"clients": [{"key_env": "TEAM_A", "tenant": "team-a"}, {"key_env": "TEAM_B", "tenant": "team-b"}],
			"models": {"gpt-4o-mini": {"rpm": 100, "tpm": 100000}}}]}`)
		if err != nil {
			t.Fatal(err)
		}
		prefix := redistest.Name(t)
		prov, err := fakeprovider.New(fakeprovider.Config{RequestLimit: 100, TokenLimit: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		seen := &keysSeen{seen: map[string]int{}, h: prov}
		r := startProxy(t, b, prefix, httptestServer(t, seen), maxWait(50*time.Millisecond), func(c *proxy.Config) { c.File = f })
		call := func(proxyKey string) error {
			c := openai.NewClient(option.WithBaseURL(r.srv.URL+"/openai/v1/"), option.WithAPIKey(proxyKey), option.WithMaxRetries(0))
			_, err := c.Chat.Completions.New(context.Background(), chatParams())
			return err
		}
		var got []string
		for _, k := range []string{"pk-team-a", "pk-team-a", "pk-team-a", "pk-team-b", "pk-team-b"} {
			switch err := call(k); {
			case err == nil:
				got = append(got, "ok")
			case answeredByProxy(err):
				got = append(got, "429")
			default:
				t.Fatalf("call with %s: %v", k, err)
			}
		}
		if strings.Join(got, " ") != "ok ok 429 ok ok" {
			t.Errorf("team-a, team-a, team-a, team-b, team-b = %v; want team-a held back at its rpm of 2, team-b served", got)
		}
		if len(seen.seen) != 1 || seen.seen["Bearer "+heldKey] != 4 {
			t.Errorf("the provider saw keys %v; want only the held key, 4 times", seen.seen)
		}
		p, err := pacer.Open(context.Background(), b.Client(t), prefix, proxy.BudgetName("openai", heldKey, "gpt-4o-mini"))
		if err != nil {
			t.Fatal(err)
		}
		if tn := p.Config().Tenants; p.Config().Limits != (pacer.Limits{RPM: 100, TPM: 100_000}) || p.Config().Version != 2 || tn.Share != 0.5 || len(tn.Rates) != 1 || tn.Rates[0].Limit != 2 {
			t.Errorf("stored: %v, tenants %+v, version %d; want the file's rpm=100 tpm=100000, share 0.5 and rpm 2 a tenant, version 2", p.Config().Limits, tn, p.Config().Version)
		}
		// A model the file does not name learns its limits, keeping the tenants.
		c := openai.NewClient(option.WithBaseURL(r.srv.URL+"/openai/v1/"), option.WithAPIKey("pk-team-b"), option.WithMaxRetries(0))
		params := chatParams()
		params.Model = "gpt-4o"
		if _, err := c.Chat.Completions.New(context.Background(), params); err != nil {
			t.Fatalf("a model the file does not name: %v", err)
		}
		learned, err := pacer.Open(context.Background(), b.Client(t), prefix, proxy.BudgetName("openai", heldKey, "gpt-4o"))
		if err != nil {
			t.Fatal(err)
		}
		if learned.Config().Limits != (pacer.Limits{RPM: 100, TPM: 100_000}) || learned.Config().Version != 1 || learned.Config().Tenants.Share != 0.5 {
			t.Errorf("learned: %v, tenants %+v, version %d; want the headers' limits with the file's tenants, version 1", learned.Config().Limits, learned.Config().Tenants, learned.Config().Version)
		}
		// A proxy key is for its provider's route only.
		status, _, body := send(t, r, "POST", "/anthropic/v1/messages", `{"model":"claude-sonnet-4-5"}`, "x-api-key", "pk-team-a")
		if status != http.StatusUnauthorized || !strings.Contains(body, "/openai/") {
			t.Errorf("a proxy key of openai on /anthropic/ = %d %s, want 401", status, body)
		}
	})
}

// TestFileErrors checks that a configuration file that cannot work is
// refused with a message naming the field to fix.
func TestFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"not json", `{"keys": [`, "docs/proxy.md"},
		{"unknown field", `{"keys": [{"provider": "openai", "key_env": "HELD", "limits": {}}]}`, "unknown field"},
		{"provider", `{"keys": [{"provider": "bedrock", "key_env": "HELD"}]}`, "give openai, anthropic, azure or gemini"},
		{"no key_env", `{"keys": [{"provider": "openai"}]}`, "keys[0] has no key_env"},
		{"unset env", `{"keys": [{"provider": "openai", "key_env": "NOPE"}]}`, "NOPE is empty or unset"},
		{"no tenant", `{"keys": [{"provider": "openai", "key_env": "HELD", "clients": [{"key_env": "TEAM_A"}]}]}`, "clients[0] has no tenant"},
		{"same key twice", `{"keys": [{"provider": "openai", "key_env": "HELD", "clients": [{"key_env": "HELD", "tenant": "x"}]}]}`, "hold the same key"},
		{"version 1", `{"version": 1, "keys": []}`, "give 2 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFile(t, tc.text)
			if !errors.Is(err, proxy.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadFile = %v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
	f, err := loadFile(t, `{"keys": [{"provider": "openai", "key_env": "HELD", "models": {"m": {"rpm": -1}}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = proxy.New(proxy.Config{Redis: redistest.Mini(t).Client(t), File: f})
	if !errors.Is(err, proxy.ErrInvalid) || !strings.Contains(err.Error(), `model "m"`) || strings.Contains(err.Error(), heldKey) {
		t.Errorf("proxy.New(negative rpm) = %v, want ErrInvalid naming the model, not the key", err)
	}
}
