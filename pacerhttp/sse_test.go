package pacerhttp

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	antssestream "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	oaissestream "github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmpacer/llmpacer/classify"
)

// scanResult is everything a scanner reports, for comparing runs.
type scanResult struct {
	Usage    usage
	HasUsage bool
	Kind     classify.Kind
	Code     string
	Failed   bool
}

// scan feeds data to a new scanner in pieces cut at the given offsets
// and returns what it reports.
func scan(a api, data []byte, cuts ...int) scanResult {
	return result(scanner(a, data, cuts...))
}

// scanner feeds data to a new scanner in pieces cut at the given
// offsets, which must be in order, and returns it.
func scanner(a api, data []byte, cuts ...int) *streamScanner {
	s := newStreamScanner(a)
	prev := 0
	for _, c := range cuts {
		c = min(max(c, prev), len(data))
		s.Write(data[prev:c])
		prev = c
	}
	s.Write(data[prev:])
	return s
}

// result reads a scanner's findings.
func result(s *streamScanner) scanResult {
	var r scanResult
	r.Usage, r.HasUsage = s.Usage()
	v, failed := s.Failure()
	r.Kind, r.Code, r.Failed = v.Kind, v.Code, failed
	return r
}

// readStream loads a fixture from testdata/streams.
func readStream(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "streams", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lineEndings returns data with its \n line ends as \n, \r\n and \r:
// the three the SSE spec allows.
func lineEndings(data []byte) map[string][]byte {
	return map[string][]byte{
		"lf":   data,
		"crlf": bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n")),
		"cr":   bytes.ReplaceAll(data, []byte("\n"), []byte("\r")),
	}
}

// streamTests are the fixtures, with the usage and failure each holds.
var streamTests = []struct {
	file string
	a    api
	want scanResult
}{
	{"openai_chat.sse", apiOpenAIChat, scanResult{Usage: usage{Input: 1290, Cached: 1024, Output: 31, Total: 1321}, HasUsage: true}},
	{"openai_chat_error.sse", apiOpenAIChat, scanResult{Kind: classify.Transient, Code: "server_error", Failed: true}},
	{"anthropic.sse", apiAnthropicMessages, scanResult{Usage: usage{Input: 25, CacheWrite: 100, CacheRead: 2000, Output: 15, Total: 2140}, HasUsage: true}},
	{"anthropic_error.sse", apiAnthropicMessages, scanResult{Usage: usage{Input: 410, Output: 1, Total: 411}, HasUsage: true, Kind: classify.Overloaded, Code: "overloaded_error", Failed: true}},
	{"responses.sse", apiOpenAIResponses, scanResult{Usage: usage{Input: 37, Output: 11, Total: 48}, HasUsage: true}},
	{"responses_error.sse", apiOpenAIResponses, scanResult{Kind: classify.RateLimited, Code: "rate_limit_exceeded", Failed: true}},
	{"responses_failed.sse", apiOpenAIResponses, scanResult{Usage: usage{Input: 20, Total: 20}, HasUsage: true, Kind: classify.Transient, Code: "server_error", Failed: true}},
	{"gemini.sse", apiGeminiStream, scanResult{Usage: usage{Input: 1008, Cached: 1000, Output: 131, Total: 1139}, HasUsage: true}},
	{"gemini_error.sse", apiGeminiStream, scanResult{Usage: usage{Input: 8, Total: 8}, HasUsage: true, Kind: classify.Overloaded, Code: "UNAVAILABLE", Failed: true}},
	{"gemini_array.json", apiGeminiStream, scanResult{Usage: usage{Input: 8, Output: 6, Total: 14}, HasUsage: true}},
}

// TestStreamScanner checks every fixture under each line ending, fed
// whole, a byte at a time, and in random pieces.
func TestStreamScanner(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range streamTests {
		for ending, data := range lineEndings(readStream(t, tt.file)) {
			t.Run(tt.file+"/"+ending, func(t *testing.T) {
				if diff := cmp.Diff(tt.want, scan(tt.a, data)); diff != "" {
					t.Errorf("scan whole mismatch (-want +got):\n%s", diff)
				}
				every := make([]int, len(data))
				for i := range every {
					every[i] = i
				}
				if diff := cmp.Diff(tt.want, scan(tt.a, data, every...)); diff != "" {
					t.Errorf("scan byte by byte mismatch (-want +got):\n%s", diff)
				}
				for range 20 {
					cuts := make([]int, rng.IntN(8))
					for i := range cuts {
						cuts[i] = rng.IntN(len(data) + 1)
					}
					if diff := cmp.Diff(tt.want, scan(tt.a, data, sortInts(cuts)...)); diff != "" {
						t.Errorf("scan cut at %v mismatch (-want +got):\n%s", cuts, diff)
					}
				}
			})
		}
	}
}

// sortInts sorts cut offsets in place and returns them.
func sortInts(s []int) []int {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// sseResponse wraps a fixture as the event-stream response the SDKs'
// stream decoders read.
func sseResponse(data []byte) *http.Response {
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(data)),
	}
}

// TestScannerEdges covers the spec corners that the fixtures do not.
func TestScannerEdges(t *testing.T) {
	chatUsage := `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	want := scanResult{Usage: usage{Input: 3, Output: 4, Total: 7}, HasUsage: true}
	none := scanResult{}
	big := strings.Repeat("x", maxEvent)
	tests := []struct {
		name   string
		a      api
		stream string
		want   scanResult
	}{
		{"no space after colon", apiOpenAIChat, "data:" + chatUsage + "\n\n", want},
		{"two spaces keep one", apiOpenAIChat, "data:  " + chatUsage + "\n\n", want},
		{"multi-line data joined with LF", apiOpenAIChat, "data: {\"choices\":[],\ndata: \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\n", want},
		{"byte-order mark and blank lines first", apiOpenAIChat, "\xEF\xBB\xBF\n\ndata: " + chatUsage + "\n\n", want},
		{"comment, id and retry lines", apiOpenAIChat, ": hi\nid: 7\nretry: 100\ndata: " + chatUsage + "\n\n", want},
		{"undispatched last event", apiOpenAIChat, "data: " + chatUsage + "\n", none},
		{"usage null is no usage", apiOpenAIChat, "data: {\"choices\":[],\"usage\":null}\n\n", none},
		{"later usage replaces", apiOpenAIChat, "data: {\"usage\":{\"prompt_tokens\":1,\"total_tokens\":1}}\n\ndata: " + chatUsage + "\n\n", want},
		{"over-long line skipped, next event read", apiOpenAIChat, "data: " + big + "\n\ndata: " + chatUsage + "\n\n", want},
		{"over-long event skipped whole", apiOpenAIChat, "data: " + big[:maxEvent/2] + "\ndata: " + big[:maxEvent/2] + "\ndata: " + chatUsage + "\n\n", none},
		{"an event just under the cap is read", apiOpenAIChat, "data: " + chatUsage + strings.Repeat(" ", maxEvent-len(chatUsage)) + "\n\n", want},
		{"an event just over the cap is not", apiOpenAIChat, "data: " + chatUsage + strings.Repeat(" ", maxEvent-len(chatUsage)+1) + "\n\n", none},
		{"plain JSON answer to a stream request", apiOpenAIChat, " \n" + chatUsage, want},
		{"plain Anthropic message", apiAnthropicMessages, `{"type":"message","usage":{"input_tokens":5,"output_tokens":6}}`, scanResult{Usage: usage{Input: 5, Output: 6, Total: 11}, HasUsage: true}},
		{"plain JSON error", apiOpenAIChat, `{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota"}}`, scanResult{Kind: classify.QuotaExhausted, Code: "insufficient_quota", Failed: true}},
		{"gemini array error element", apiGeminiStream, `[{"usageMetadata":{"promptTokenCount":2,"totalTokenCount":2}},{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]`, scanResult{Usage: usage{Input: 2, Total: 2}, HasUsage: true, Kind: classify.RateLimited, Code: "RESOURCE_EXHAUSTED", Failed: true}},
		{"gemini array, over-long chunk skipped", apiGeminiStream, `[{"t":"` + big + `","usageMetadata":{"promptTokenCount":9}},{"usageMetadata":{"promptTokenCount":2,"totalTokenCount":2}}]`, scanResult{Usage: usage{Input: 2, Total: 2}, HasUsage: true}},
		{"gemini array without usage", apiGeminiStream, `[{"candidates":[]}]`, none},
		{"first error wins", apiAnthropicMessages, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"}}\n\n", scanResult{Kind: classify.Overloaded, Code: "overloaded_error", Failed: true}},
		{"anthropic error event that is not JSON", apiAnthropicMessages, "event: error\ndata: upstream connect error\n\n", scanResult{Kind: classify.Permanent, Failed: true}},
		{"anthropic usage before message_delta", apiAnthropicMessages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n", scanResult{Usage: usage{Input: 7, Output: 1, Total: 8}, HasUsage: true}},
		{"anthropic delta may restate input", apiAnthropicMessages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":9,\"cache_read_input_tokens\":0,\"output_tokens\":30}}\n\n", scanResult{Usage: usage{Input: 9, Output: 30, Total: 39}, HasUsage: true}},
		{"not a stream at all", apiOpenAIChat, "<html>502 Bad Gateway</html>", none},
		{"empty", apiOpenAIChat, "", none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.stream)
			if diff := cmp.Diff(tt.want, scan(tt.a, data)); diff != "" {
				t.Errorf("scan whole mismatch (-want +got):\n%s", diff)
			}
			if len(data) > 3 {
				// Cut in three: mid-line, and often mid-UTF-8 or mid-CRLF.
				if diff := cmp.Diff(tt.want, scan(tt.a, data, len(data)/3, 2*len(data)/3)); diff != "" {
					t.Errorf("scan in thirds mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestScannerCRLFSplit checks the one split that needs state: a \r at the
// end of one Write and its \n at the start of the next is one line end,
// not two, so it must not dispatch an event early.
func TestScannerCRLFSplit(t *testing.T) {
	s := newStreamScanner(apiOpenAIChat)
	s.Write([]byte("data: {\"usage\":\r"))
	s.Write([]byte("\ndata: {\"prompt_tokens\":2,\"total_tokens\":2}}\r"))
	s.Write([]byte("\n\r\n"))
	got, ok := s.Usage()
	if want := (usage{Input: 2, Total: 2}); !ok || got != want {
		t.Errorf("Usage() = %+v, %v; want %+v, true", got, ok, want)
	}
}

// TestScannerMemoryBound feeds a 16 MiB stream with no line end and
// checks the scanner held no more than its cap.
func TestScannerMemoryBound(t *testing.T) {
	s := newStreamScanner(apiOpenAIChat)
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	s.Write([]byte("data: "))
	for range 256 {
		s.Write(chunk)
	}
	if c := cap(s.line) + cap(s.data); c > maxLine+maxEvent {
		t.Errorf("scanner holds %d bytes after an endless line, want at most %d", c, maxLine+maxEvent)
	}
	s.Write([]byte("\n\ndata: {\"usage\":{\"prompt_tokens\":1,\"total_tokens\":1}}\n\n"))
	if _, ok := s.Usage(); !ok {
		t.Error("Usage() after an over-long line: no usage, want the next event's")
	}
}

// TestScannerMatchesSDK runs the fixtures through the SDKs' own stream
// decoders and accumulators, and checks that the scanner reads the same
// numbers the SDK hands its caller: the fixtures are shaped as the SDKs
// expect, and the scanner reads the fields the SDKs read.
func TestScannerMatchesSDK(t *testing.T) {
	t.Run("openai chat", func(t *testing.T) {
		data := readStream(t, "openai_chat.sse")
		stream := oaissestream.NewStream[openai.ChatCompletionChunk](oaissestream.NewDecoder(sseResponse(data)), nil)
		var want usage
		for stream.Next() {
			if u := stream.Current().Usage; u.JSON.TotalTokens.Valid() {
				want = usage{Input: u.PromptTokens, Cached: u.PromptTokensDetails.CachedTokens, Output: u.CompletionTokens, Total: u.TotalTokens}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := scan(apiOpenAIChat, data); !got.HasUsage || got.Usage != want {
			t.Errorf("scan() usage = %+v, %v; the SDK read %+v", got.Usage, got.HasUsage, want)
		}
	})
	t.Run("openai responses", func(t *testing.T) {
		data := readStream(t, "responses.sse")
		stream := oaissestream.NewStream[responses.ResponseStreamEventUnion](oaissestream.NewDecoder(sseResponse(data)), nil)
		var want usage
		for stream.Next() {
			if ev := stream.Current(); ev.Type == "response.completed" {
				u := ev.Response.Usage
				want = usage{Input: u.InputTokens, Cached: u.InputTokensDetails.CachedTokens, Output: u.OutputTokens, Total: u.TotalTokens}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := scan(apiOpenAIResponses, data); !got.HasUsage || got.Usage != want {
			t.Errorf("scan() usage = %+v, %v; the SDK read %+v", got.Usage, got.HasUsage, want)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		data := readStream(t, "anthropic.sse")
		stream := antssestream.NewStream[anthropic.MessageStreamEventUnion](antssestream.NewDecoder(sseResponse(data)), nil)
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		u := msg.Usage
		want := usage{Input: u.InputTokens, CacheRead: u.CacheReadInputTokens, CacheWrite: u.CacheCreationInputTokens, Output: u.OutputTokens}
		want.Total = want.Input + want.CacheRead + want.CacheWrite + want.Output
		if got := scan(apiAnthropicMessages, data); !got.HasUsage || got.Usage != want {
			t.Errorf("scan() usage = %+v, %v; the SDK read %+v", got.Usage, got.HasUsage, want)
		}
	})
	t.Run("anthropic error", func(t *testing.T) {
		data := readStream(t, "anthropic_error.sse")
		stream := antssestream.NewStream[anthropic.MessageStreamEventUnion](antssestream.NewDecoder(sseResponse(data)), nil)
		for stream.Next() {
		}
		sdkErr := stream.Err()
		if sdkErr == nil {
			t.Fatal("the SDK saw no error in the error fixture")
		}
		got := scan(apiAnthropicMessages, data)
		if v := classify.FromError(sdkErr); !got.Failed || got.Kind != v.Kind || got.Code != v.Code {
			t.Errorf("scan() failure = %v %q, %v; classify.FromError(SDK error) = %v %q", got.Kind, got.Code, got.Failed, v.Kind, v.Code)
		}
	})
	t.Run("openai chat error", func(t *testing.T) {
		data := readStream(t, "openai_chat_error.sse")
		stream := oaissestream.NewStream[openai.ChatCompletionChunk](oaissestream.NewDecoder(sseResponse(data)), nil)
		for stream.Next() {
		}
		if stream.Err() == nil {
			t.Fatal("the SDK saw no error in the error fixture")
		}
		if got := scan(apiOpenAIChat, data); !got.Failed {
			t.Errorf("scan() found no failure where the SDK stopped with %v", stream.Err())
		}
	})
}

// Done says a stream passed its own end marker, so that a body closed
// right after it counts as whole; a stream cut before it is not done.
func TestScannerDone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a      api
		stream string
		done   bool
	}{
		{"openai [DONE]", apiOpenAIChat, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", true},
		{"openai cut", apiOpenAIChat, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n", false},
		{"anthropic message_stop", apiAnthropicMessages, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", true},
		{"anthropic cut after message_start", apiAnthropicMessages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n", false},
	} {
		s := newStreamScanner(tc.a)
		s.Write([]byte(tc.stream))
		if got := s.Done(); got != tc.done {
			t.Errorf("%s: Done() = %v; want %v", tc.name, got, tc.done)
		}
	}
}
