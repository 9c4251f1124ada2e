package classify

import (
	"strings"
)

// statusMarkers precede an HTTP status in the error texts of the SDKs this
// package knows:
//
//	anthropic-sdk-go             POST "https://api.anthropic.com/v1/...": 429 Too Many Requests {...}
//	openai-go v3                 OpenAI API error: 429 Too Many Requests
//	google genai                 Error 429, Message: ..., Status: RESOURCE_EXHAUSTED, Details: [...]
//	aws smithy                   https response error StatusCode: 429, RequestID: ...
//	sashabaranov/go-openai       error, status code: 429, status: 429 Too Many Requests, message: ...
var statusMarkers = []string{
	"\": ",
	"API error: ",
	"Error ",
	"StatusCode: ",
	"status code: ",
	"status code ",
	"HTTP/1.1 ",
	"HTTP/2 ",
}

// fromText reads what it can from an error's text. It is the last resort,
// for SDK errors whose status and body sit in struct fields this package
// cannot reach without importing the SDK (google genai's APIError has only
// fields), and for errors flattened to strings. These errors aren't typed
// for us, so we resort to matching on the error string. Only the first
// MaxBodyBytes of the text are read.
func fromText(s string) (status int, env envelope) {
	if len(s) > MaxBodyBytes {
		s = s[:MaxBodyBytes]
	}
	status = textStatus(s)
	// anthropic-sdk-go ends its error text with the raw JSON body;
	// openai-go v3's text is only the status.
	if i := strings.IndexByte(s, '{'); i >= 0 {
		env = parseJSON([]byte(s[i:]))
	}
	if !env.isError() {
		env = genaiFields(s)
	}
	env.hint = providerFromText(s)
	return status, env
}

// textStatus finds the first status in [100, 599] that follows one of
// statusMarkers and is not followed by another digit.
func textStatus(s string) int {
	for _, m := range statusMarkers {
		rest := s
		for {
			i := strings.Index(rest, m)
			if i < 0 {
				break
			}
			rest = rest[i+len(m):]
			if n := leadingStatus(rest); n != 0 {
				return n
			}
		}
	}
	return 0
}

// leadingStatus returns the three-digit status at the start of s, or 0.
func leadingStatus(s string) int {
	if len(s) < 3 {
		return 0
	}
	n := 0
	for i := 0; i < 3; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	if len(s) > 3 && s[3] >= '0' && s[3] <= '9' {
		return 0
	}
	if n < 100 || n > 599 {
		return 0
	}
	return n
}

// genaiFields reads google genai's APIError text:
//
//	Error 429, Message: <msg>, Status: RESOURCE_EXHAUSTED, Details: [map[@type:...RetryInfo retryDelay:37s] ...]
//
// The Details part is Go's %v of []map[string]any, so quota ids and the
// retry delay appear as "quotaId:<id>" and "retryDelay:<d>".
func genaiFields(s string) envelope {
	var env envelope
	if i := strings.Index(s, "Status: "); i >= 0 {
		env.rpcStatus = rpcName(s[i+len("Status: "):])
	}
	if i := strings.Index(s, "Message: "); i >= 0 {
		msg := s[i+len("Message: "):]
		if j := strings.Index(msg, ", Status: "); j >= 0 {
			msg = msg[:j]
		}
		env.message = clip(msg, MaxMessageLen)
	}
	if i := strings.Index(s, "retryDelay:"); i >= 0 {
		env.retryDelay = textToken(s[i+len("retryDelay:"):])
	}
	rest := s
	for len(env.quotaIDs) < maxQuotaIDs {
		i := strings.Index(rest, "quotaId:")
		if i < 0 {
			break
		}
		rest = rest[i+len("quotaId:"):]
		env.quotaIDs = append(env.quotaIDs, textToken(rest))
	}
	if env.rpcStatus == "" {
		return envelope{} // not genai's format: nothing here can be trusted
	}
	return env
}

// rpcName returns the leading google.rpc.Code name of s
// ("RESOURCE_EXHAUSTED"), or "" when s does not start with one.
func rpcName(s string) string {
	end := 0
	for end < len(s) && end < 32 && (s[end] >= 'A' && s[end] <= 'Z' || s[end] == '_') {
		end++
	}
	if end < 4 {
		return ""
	}
	return s[:end]
}

// textToken returns s up to the first space, comma or bracket, at most 128
// bytes.
func textToken(s string) string {
	s = strings.TrimLeft(s, " \"")
	end := strings.IndexAny(s, " ,]}\"\n")
	if end < 0 {
		end = len(s)
	}
	if end > 128 {
		end = 128
	}
	return s[:end]
}
