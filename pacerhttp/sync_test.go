package pacerhttp_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	ooption "github.com/openai/openai-go/v3/option"
)

// A caller outside the pacer uses most of the provider's tokens; the next
// paced call's answer headers bring the budget down to what the provider
// has left. With WithHeaderSync(false) the budget keeps its own count.
func TestHeaderSyncFollowsTheProvider(t *testing.T) {
	const limit = 10_000 // tokens per minute, on both sides
	for _, sync := range []bool{true, false} {
		t.Run("sync="+strconv.FormatBool(sync), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b redistest.Backend) {
				r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: limit}, fakeprovider.Config{TokenLimit: limit})
				p, ev := r.pacer()
				ctx := context.Background()
				// 7,900 prompt tokens and 100 of output: 8,000 of 10,000.
				req, err := http.NewRequest(http.MethodPost, r.server.URL+"/v1/chat/completions",
					strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"a long document"}]}`))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set(fakeprovider.PromptTokensHeader, "7900")
				outside := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("the outside call = %v, %v", resp, err)
				}
				resp.Body.Close()

				began := time.Now()
				c := r.openai(p, pacerhttp.WithHeaderSync(sync))
				var answer *http.Response
				reply, err := c.Chat.Completions.New(ctx, chatParams(50), ooption.WithResponseInto(&answer))
				if err != nil {
					t.Fatal(err)
				}
				remaining, err := strconv.ParseFloat(answer.Header.Get("x-ratelimit-remaining-tokens"), 64)
				// The provider refills 167 tokens a second since the outside
				// call: on a loaded machine more than the paced call takes.
				if most := limit - 8000 + limit/60*time.Since(outside).Seconds(); err != nil || remaining > most {
					t.Fatalf("x-ratelimit-remaining-tokens %q (%v); want at most %.0f", answer.Header.Get("x-ratelimit-remaining-tokens"), err, most)
				}
				reserved := float64(admittedTokens(t, ev, 1))
				used := float64(reply.Usage.TotalTokens)
				level := func() float64 {
					s, err := p.Snapshot(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return s.Rate("tpm").Level
				}
				ev.balanced(t)
				if !sync {
					// No Sync was queued: the level is the budget's own count,
					// at once.
					if got := level(); got < limit-used-1 {
						t.Errorf("TPM level %.0f; want the budget's own count, at least %.0f", got, limit-used-1)
					}
					return
				}
				// The level may sit above the provider's figure by what the
				// lease's settle gave back and what a real clock refilled
				// since the answer.
				var got float64
				waitFor(t, "the budget did not come down to the provider's remaining tokens", func() bool {
					got = level()
					slack := math.Abs(reserved-used) + limit/60*time.Since(began).Seconds() + 1
					return got <= remaining+slack
				})
				if got < remaining-1 {
					t.Errorf("TPM level %.0f; want no lower than the provider's %.0f", got, remaining)
				}
			})
		})
	}
}
