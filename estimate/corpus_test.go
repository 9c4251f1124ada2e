package estimate

// Realistic prompt material shared by the report, the benchmarks and the
// fallback tests. All of it is written for these tests.

// corpusProse is about 2 KB of ordinary English, the size of a typical
// system prompt plus user question.
const corpusProse = `You are a support assistant for a company that sells project-management software to small and medium-sized businesses. Answer the customer's question using only the information in the knowledge base excerpts below. If the excerpts do not contain the answer, say so plainly and suggest that the customer contact support by email; never invent features, prices or deadlines.

Keep your answer short: two or three paragraphs at most, written in plain language for someone who is not technical. Use a numbered list only when the customer has to follow steps in order. Do not mention that you were given excerpts, and do not quote internal ticket numbers.

When the customer is upset, acknowledge the problem in one sentence before you explain what to do. When a question touches on billing, remind the customer that invoices can be downloaded from the Billing page in their account settings, and that refunds are handled by the finance team within five business days of a request.

If the customer mentions a deadline, such as a meeting, a launch or a renewal date, address it directly: say whether the suggested fix can be done before then, and what the customer should do if it cannot. Prefer steps the customer can take alone over steps that need our support team, and say which is which. If several colleagues are affected, tell the customer whether the fix has to be repeated for each of them or can be applied once for the whole workspace.

Customer question: Hi, we moved our team of twelve people from the Starter plan to the Business plan last Tuesday, but three of my colleagues still cannot see the timeline view on the shared projects. I have already asked them to log out and back in, and one of them even reinstalled the desktop app, which did not help. Our renewal date is at the end of the month and I want to be sure we are not charged twice for the same seats. Could you tell me what is going on and whether I need to do anything else on my side before the renewal? Thanks in advance for your help, this is blocking our planning meeting on Thursday.`

// corpusCode is a Go snippet of the kind pasted into a code question.
const corpusCode = `// Package cache provides a small LRU cache with per-entry expiry.
package cache

import (
	"container/list"
	"sync"
	"time"
)

type entry[K comparable, V any] struct {
	key     K
	value   V
	expires time.Time
}

// Cache is an LRU cache safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	order *list.List
	items map[K]*list.Element
}

// New returns a cache holding at most max entries for ttl each.
func New[K comparable, V any](max int, ttl time.Duration) *Cache[K, V] {
	return &Cache[K, V]{max: max, ttl: ttl, order: list.New(), items: make(map[K]*list.Element)}
}

// Get returns the value for key and whether it was present and fresh.
func (c *Cache[K, V]) Get(key K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*entry[K, V])
	if now.After(e.expires) {
		c.order.Remove(el)
		delete(c.items, key)
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.value, true
}

// Put stores value under key, evicting the least recently used entry.
func (c *Cache[K, V]) Put(key K, value V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*entry[K, V])
		e.value, e.expires = value, now.Add(c.ttl)
		c.order.MoveToFront(el)
		return
	}
	if c.order.Len() >= c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*entry[K, V]).key)
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key: key, value: value, expires: now.Add(c.ttl)})
}
`

// corpusDiff is a unified diff of the kind sent for code review.
const corpusDiff = `diff --git a/internal/billing/invoice.go b/internal/billing/invoice.go
index 3b1c2d4..9f8e7a6 100644
--- a/internal/billing/invoice.go
+++ b/internal/billing/invoice.go
@@ -41,18 +41,27 @@ func (s *Service) Issue(ctx context.Context, acct AccountID, period Period) (*Invoice, error) {
 	seats, err := s.seats.Count(ctx, acct, period)
 	if err != nil {
 		return nil, fmt.Errorf("billing: count seats: %w", err)
 	}
-	amount := seats * s.prices.PerSeat(period.Plan)
+	prorated, err := s.prorate(ctx, acct, period)
+	if err != nil {
+		return nil, fmt.Errorf("billing: prorate: %w", err)
+	}
+	amount := seats*s.prices.PerSeat(period.Plan) - prorated
+	if amount < 0 {
+		// A downgrade mid-period can leave a credit larger than the new
+		// charge; carry it forward instead of issuing a negative invoice.
+		s.credits.Add(ctx, acct, -amount)
+		amount = 0
+	}
 	inv := &Invoice{
 		Account: acct,
 		Period:  period,
 		Seats:   seats,
 		Amount:  amount,
 	}
-	if err := s.store.Save(ctx, inv); err != nil {
+	if err := s.store.SaveOnce(ctx, inv, period.Key()); err != nil {
 		return nil, fmt.Errorf("billing: save invoice: %w", err)
 	}
 	return inv, nil
 }
`

// corpusDocs are retrieved passages for the RAG prompt, about 1 KB each.
var corpusDocs = []string{
	`Plans and seats. Every workspace is on exactly one plan: Starter, Business or Enterprise. A plan change takes effect immediately for the workspace, but each member's permissions are refreshed the next time the member's session is renewed, which happens at most every 24 hours. Administrators can force a refresh for all members from Settings, Members, "Refresh access". Seats are counted per active member per billing period; a member who is deactivated before the period ends is billed pro rata for the days the member was active.`,
	`Timeline view. The timeline view shows tasks with start and due dates on a horizontal calendar. It is available on the Business and Enterprise plans. On shared projects, a member sees the timeline only if the project owner's workspace is on an eligible plan and the member has at least Editor access to the project. Guests never see the timeline, whatever the plan. If a member was a guest before the plan change, the administrator must convert the guest to a full member; conversion counts as an additional seat.`,
	`Billing and renewals. Invoices are issued on the renewal date for the coming period. When a workspace upgrades mid-period, the difference between the old and the new plan is charged on the day of the upgrade, prorated to the end of the current period, and the renewal invoice then charges the new plan in full. Customers are never charged twice for the same seat in the same period: the renewal invoice lists the prorated charge as already paid. Invoices can be downloaded from the Billing page in account settings.`,
	`Desktop app. The desktop app caches project permissions for offline use. After a plan change, the cache is updated when the app next syncs, at most fifteen minutes after the member's session refresh. Reinstalling the app does not clear the cached session on the server, so it does not speed up a permission change; signing out of all sessions from the web app does. The desktop app requires version 4.2 or later for the timeline view; older versions show a prompt to update.`,
	`Support hours and contact. The support team answers email within one business day, and within four hours for Enterprise workspaces. Billing questions are routed to the finance team, which processes refunds within five business days of an approved request. For urgent access problems, administrators can use the in-app chat, which is staffed from 8:00 to 18:00 Central European Time on weekdays. Please include the workspace name and the affected members' email addresses so that the team can look up the accounts quickly.`,
}
