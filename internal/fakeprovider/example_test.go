package fakeprovider_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
)

// The storm's provider: 10,000 tokens per 5 s. Each call charges its
// prompt (1 token for "hi") plus max_tokens, so the tenth call is refused.
func Example() {
	p, err := fakeprovider.New(fakeprovider.Config{
		TokenLimit: 10_000, Window: 5 * time.Second, Mode: fakeprovider.SlidingWindow,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	const body = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`
	for i := 1; i <= 10; i++ {
		res, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			fmt.Println("call", i, res.StatusCode, "retry-after", res.Header.Get("retry-after"))
		}
	}
	s := p.Stats()
	fmt.Println("OK", s.OK, "RateLimited", s.RateLimited, "TokensAdmitted", s.TokensAdmitted)
	// Output:
	// call 10 429 retry-after 5
	// OK 9 RateLimited 1 TokensAdmitted 9009
}
