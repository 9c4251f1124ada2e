package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printListing writes l as text, a block per budget.
func printListing(w io.Writer, o options, l listing) {
	at := ""
	for _, b := range l.Budgets {
		if !b.Time.IsZero() {
			at = " at " + b.Time.UTC().Format("2006-01-02 15:04:05 MST") + " (Redis clock)"
			break
		}
	}
	fmt.Fprintf(w, "%s, prefix %q: %d %s%s\n", l.Redis, l.Prefix, len(l.Budgets), plural(len(l.Budgets), "budget", "budgets"), at)
	if l.Truncated {
		fmt.Fprintf(w, "note: the scan stopped after -scan %d keys, before the end: budgets or tenants may be missing; raise -scan, or name the budget with show\n", o.scan)
	}
	if len(l.Budgets) == 0 && o.cmd == "list" && !l.Truncated {
		fmt.Fprintf(w, "no keys under %q: check -prefix (the budgets' Config.KeyPrefix), and that this is the Redis the application uses\n", "{"+l.Prefix+":")
	}
	for _, b := range l.Budgets {
		fmt.Fprintln(w)
		printBudget(w, b)
	}
}

func printBudget(w io.Writer, b budget) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	if b.Version != 0 {
		fmt.Fprintf(tw, "%s  (definition v%d)\n", b.Name, b.Version)
		fmt.Fprintf(tw, "  limit\tlevel\tcapacity\troom\tfull in\trefill/s\n")
		for _, l := range b.Limits {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\n", l.Name, num(l.Level), l.Capacity, pct(l.Level, l.Capacity), fullIn(l.FullInS, l.Sliding), num(l.PerSecond))
		}
	} else if !b.Time.IsZero() {
		fmt.Fprintf(tw, "%s  (no stored definition: levels need one; store it with pacer.Pacer.Define, or give the Config a Version)\n", b.Name)
		if len(b.Raw) > 0 {
			fmt.Fprintf(tw, "  bucket\tfull in\n")
		}
		for _, f := range b.Raw {
			fmt.Fprintf(tw, "  %s\t%s\n", fieldName(f.Field), rawFull(f))
		}
	} else {
		fmt.Fprintf(tw, "%s\n", b.Name)
	}
	if !b.Time.IsZero() {
		slots := fmt.Sprintf("%d", b.InFlight)
		if b.Concurrency > 0 {
			slots += fmt.Sprintf(" of %d", b.Concurrency)
		}
		fmt.Fprintf(tw, "  in flight %s; %d waiting for a slot\n", slots, b.Waiting)
	}
	if b.PausedS > 0 {
		fmt.Fprintf(tw, "  PAUSED for %v more: every caller waits\n", secs(b.PausedS))
	}
	switch b.StoppedBy {
	case "quota":
		fmt.Fprintf(tw, "  STOPPED: the provider's quota is exhausted; %v more unless a probe succeeds (llmpacer resume lifts it)\n", secs(b.StoppedS))
	case "":
	default:
		fmt.Fprintf(tw, "  STOPPED by an operator for %v more (llmpacer resume ends it)\n", secs(b.StoppedS))
	}
	if ts := b.Tenants; ts != nil {
		if ts.Read < ts.Found {
			fmt.Fprintf(tw, "  tenants: %d found, %d of them read (-tenant-scan); least room first:\n", ts.Found, ts.Read)
		} else {
			fmt.Fprintf(tw, "  tenants: %d found; least room first:\n", ts.Found)
		}
		for _, t := range ts.Busiest {
			fmt.Fprintf(tw, "    %s\t%s\n", t.Hash, tenantLine(t))
		}
	}
	if b.Error != "" {
		fmt.Fprintf(tw, "  ERROR: %s\n", b.Error)
	}
}

// tenantLine is a tenant's rates and shares on one line.
func tenantLine(t tenant) string {
	var parts []string
	if t.Raw != nil {
		for _, f := range t.Raw {
			parts = append(parts, fieldName(f.Field)+" full in "+rawFull(f))
		}
		if len(parts) == 0 {
			return "full"
		}
		return strings.Join(parts, " · ")
	}
	for _, l := range append(append([]level(nil), t.Rates...), t.Shares...) {
		parts = append(parts, fmt.Sprintf("%s %s/%d", l.Name, num(l.Level), l.Capacity))
	}
	return fmt.Sprintf("room %s\t%s", pct(*t.Room, 1), strings.Join(parts, " · "))
}

// fieldName names a raw state field: a tenant's own rate ('@'), its share
// of a budget rate ('%'), a sliding window ("~<µs>:<name>").
func fieldName(f string) string {
	if rest, ok := strings.CutPrefix(f, "@"); ok {
		return "own " + fieldName(rest)
	}
	if rest, ok := strings.CutPrefix(f, "%"); ok {
		return "share of " + fieldName(rest)
	}
	if strings.HasPrefix(f, "~") {
		if i := strings.IndexByte(f, ':'); i > 0 {
			return f[i+1:] + " (sliding)"
		}
	}
	return f
}

func rawFull(f field) string {
	if f.Value != "" {
		return "? (counts " + f.Value + ")"
	}
	return fullIn(f.FullInS, false)
}

func fullIn(s float64, sliding bool) string {
	switch {
	case s <= 0:
		return "full"
	case sliding:
		return "≤" + secs(s).String()
	}
	return secs(s).String()
}

// secs turns seconds into a duration rounded for reading.
func secs(s float64) time.Duration {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

func num(v float64) string {
	if v != float64(int64(v)) && v > -100 && v < 100 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func pct(level float64, capacity int64) string {
	if capacity <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*level/float64(capacity))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
