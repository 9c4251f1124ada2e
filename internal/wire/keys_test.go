package wire

import "testing"

// CutSuffix reads back every key Keys and TenantKey spell, and nothing
// else.
func TestCutSuffix(t *testing.T) {
	tag := "openai:gpt-4o"
	h := TenantHash("acme")
	if len(h) != 32 {
		t.Fatalf("TenantHash = %q; want 32 hex digits", h)
	}
	for _, k := range append(Keys(tag), TenantKey(tag, h)) {
		name, tenant, ok := CutSuffix(k)
		if !ok || name != tag || (tenant != "") != (k == TenantKey(tag, h)) || (tenant != "" && tenant != h) {
			t.Errorf("CutSuffix(%q) = %q, %q, %v; want %q", k, name, tenant, ok, tag)
		}
	}
	for _, k := range []string{"", ":s", tag, tag + ":x", tag + ":t:" + h[:31], tag + ":t:" + h + "0", tag + ":t:" + "ABCDEF0123456789ABCDEF0123456789"} {
		if name, tenant, ok := CutSuffix(k); ok {
			t.Errorf("CutSuffix(%q) = %q, %q, true; want not a budget's key", k, name, tenant)
		}
	}
}
