package classify

import "testing"

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"  hello \n\t world  ", 100, "hello world"},
		{"abcdef", 3, "abc"},
		{"héllo", 2, "h"}, // é is two bytes: cut on the rune boundary
		{"a\x00b", 10, "a b"},
		{"\xff\xfe", 10, "\uFFFD\uFFFD"},
		{"", 10, ""},
	}
	for _, tt := range tests {
		if got := clip(tt.in, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestCleanMessage(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{
			`Post "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent?key=AIzaSecret": context deadline exceeded`,
			`Post "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent?key=REDACTED": context deadline exceeded`,
		},
		{"GET /x?a=1&api-key=abc&b=2 failed", "GET /x?a=1&api-key=REDACTED&b=2 failed"},
		{"https://x/y?sig=abc", "https://x/y?sig=REDACTED"},
		{"a monkey=banana stays", "a monkey=banana stays"},
		{"no secrets here", "no secrets here"},
	}
	for _, tt := range tests {
		if got := cleanMessage(tt.in); got != tt.want {
			t.Errorf("cleanMessage(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
