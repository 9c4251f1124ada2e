package classify

import "testing"

func TestKindString(t *testing.T) {
	tests := []struct {
		k         Kind
		want      string
		retryable bool
	}{
		{OK, "ok", false},
		{RateLimited, "rate_limited", true},
		{QuotaExhausted, "quota_exhausted", false},
		{Overloaded, "overloaded", true},
		{Transient, "transient", true},
		{Permanent, "permanent", false},
		{Canceled, "canceled", false},
		{Kind(42), "Kind(42)", false},
		{Kind(-1), "Kind(-1)", false},
	}
	for _, tt := range tests {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(tt.k), got, tt.want)
		}
		if got := tt.k.Retryable(); got != tt.retryable {
			t.Errorf("%v.Retryable() = %v, want %v", tt.k, got, tt.retryable)
		}
		if got := (Verdict{Kind: tt.k}).Retryable(); got != tt.retryable {
			t.Errorf("Verdict{Kind: %v}.Retryable() = %v, want %v", tt.k, got, tt.retryable)
		}
	}
}

func TestLimitString(t *testing.T) {
	tests := []struct {
		l    Limit
		want string
	}{
		{LimitUnknown, "unknown"},
		{LimitRequests, "requests"},
		{LimitTokens, "tokens"},
		{LimitInputTokens, "input_tokens"},
		{LimitOutputTokens, "output_tokens"},
		{Limit(9), "Limit(9)"},
	}
	for _, tt := range tests {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("Limit(%d).String() = %q, want %q", int(tt.l), got, tt.want)
		}
	}
}
