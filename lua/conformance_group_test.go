package lua_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// groupCase is one call a Group routes (route.lua) over deployments that
// share a hash tag, on one Redis.
type groupCase struct {
	Name        string   `json:"name"`
	Deployments []string `json:"deployments"` // their configs, by name, in order
	// Policy is "fill-in-order" or "most-room" (Spread draws at random).
	Policy  string   `json:"policy"`
	Request vrequest `json:"request"`
	// Replies answer the calls in order.
	Replies []any `json:"replies"`
	// Calls are the script calls made, their KEYS and ARGV as Redis gets
	// them; the lease id is "<id>" wherever it appears.
	Calls []wireCall `json:"calls"`
	Error string     `json:"error,omitempty"`
	// Chosen is the deployment (0-based) whose lease was returned.
	Chosen int `json:"chosen,omitempty"`
}

func groupVectors(t *testing.T) any {
	n := nowUs
	adm := func(i int64) []any {
		return append([]any{i}, admitted(defaultLeaseTTL)...)
	}
	two := []string{"group-eu", "group-us"}
	cases := []groupCase{
		{Name: "the first with room", Deployments: two, Policy: "fill-in-order", Request: req("try", 1300, "interactive"), Replies: []any{adm(1)}},
		{Name: "the second", Deployments: two, Policy: "fill-in-order", Request: calling(split("try", 0, 1000, 300, "batch"), "gpt-4o"), Replies: []any{adm(2)}},
		{Name: "most room: the count sent negative", Deployments: two, Policy: "most-room", Request: req("try", 1300, "interactive"), Replies: []any{adm(2)}},
		{Name: "too large for one deployment: it is left out", Deployments: two, Policy: "fill-in-order", Request: req("try", 50_000, "interactive"), Replies: []any{adm(1)}},
		{Name: "too large for every one", Deployments: two, Policy: "fill-in-order", Request: req("try", 200_000, "interactive")},
		{Name: "no room on any", Deployments: two, Policy: "fill-in-order", Request: req("try", 1300, "interactive"),
			Replies: []any{[]any{int64(2), int64(0), int64(1500), n, "tpm", int64(0), int64(0), int64(0)}}},
		{Name: "every one stopped", Deployments: two, Policy: "fill-in-order", Request: req("try", 1300, "interactive"),
			Replies: []any{[]any{int64(1), int64(0), int64(60_000), n, "quota", int64(0), int64(0), int64(0)}}},
		{Name: "acquire sends its bound", Deployments: two, Policy: "fill-in-order", Request: req("acquire", 1300, "interactive"), Replies: []any{adm(2)}},
		{Name: "another definition stored: followed, routed again", Deployments: two, Policy: "fill-in-order", Request: req("try", 1300, "interactive"),
			Replies: []any{[]any{int64(1), int64(3), int64(0), n, "", int64(0), int64(0), int64(0)}, []any{int64(0), int64(4), storedDef}, adm(1)}},
		{Name: "a tenant's call", Deployments: []string{"tenants", "tenants-spend"}, Policy: "fill-in-order",
			Request: tenant(split("try", 0, 1000, 300, "interactive"), "acme"), Replies: []any{adm(2)}},
	}
	for i := range cases {
		c := &cases[i]
		synctestGroup(t, c)
	}
	return map[string]any{
		"comment": "A Group's route (route.lua: acquire as a function, then route.lua; see lua.Source): KEYS every deployment's acquire KEYS in turn; " +
			"ARGV {d (negative for most-room), the max wait in ms, then each deployment's KEYS and ARGV counts, then each one's acquire ARGV}. " +
			"A deployment the request cannot fit (too large, invalid) is left out; none left: the first one's error. The reply is {i, acquire's reply}; " +
			"code 3 makes deployment i follow its stored definition (define {0, \"\"}) and the call is routed again. chosen: the deployment (0-based) of the lease.",
		"cases": cases,
	}
}

// synctestGroup runs c on a Group of pacers on one fake Redis client, in
// a synctest bubble (see inBubble).
func synctestGroup(t *testing.T, c *groupCase) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{}
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		rdb.AddHook(f)
		defer rdb.Close()
		var ds []pacer.Deployment
		for _, name := range c.Deployments {
			p, err := pacer.New(rdb, configByName(t, name).config())
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, pacer.Deployment{Pacer: p})
		}
		pol := pacer.FillInOrder
		if c.Policy == "most-room" {
			pol = pacer.MostRoom
		}
		g, err := pacer.NewGroup(pacer.GroupConfig{Deployments: ds, Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		f.queue(c.Replies...)
		var p *pacer.Pacer
		if c.Request.Call == "try" {
			_, p, err = g.TryAcquire(context.Background(), c.Request.request())
		} else {
			_, p, err = g.Acquire(context.Background(), c.Request.request())
		}
		c.Error = errName(err)
		c.Calls = append([]wireCall{}, f.take()...)
		for i, d := range ds {
			if d.Pacer == p {
				c.Chosen = i
			}
		}
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		time.Sleep(time.Hour)
	})
}
