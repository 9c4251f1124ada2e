package fakeprovider

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	name string
	data string
}

// parseSSE splits a stream into events, failing on a malformed line.
func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			out, cur = append(out, cur), sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("malformed SSE line %q", line)
		}
	}
	return out
}

func streamBody(style Style, includeUsage bool) string {
	b := strings.TrimSuffix(chatBody(style, 3, true), "}")
	if includeUsage {
		b += `,"stream_options":{"include_usage":true}`
	}
	return b + "}"
}

func TestOpenAIStream(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		p := newTestProvider(t, Config{TokenLimit: 1000}, newClock())
		w := post(p, OpenAI, streamBody(OpenAI, includeUsage), PromptTokensHeader, "11")
		if w.Code != http.StatusOK || w.Result().Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream = %d %q, want 200 text/event-stream", w.Code, w.Result().Header.Get("Content-Type"))
		}
		if got := w.Result().Header.Get("x-ratelimit-remaining-tokens"); got != "986" {
			t.Errorf("x-ratelimit-remaining-tokens = %q, want 986", got)
		}
		events := parseSSE(t, w.Body.String())
		if last := events[len(events)-1]; last.data != "[DONE]" {
			t.Fatalf("last event = %+v, want data: [DONE]", last)
		}
		var text, finish string
		var usage []any
		for i, ev := range events[:len(events)-1] {
			if ev.name != "" {
				t.Errorf("event %d has name %q; OpenAI sends bare data lines", i, ev.name)
			}
			m := decodeMap(t, []byte(ev.data))
			if m["object"] != "chat.completion.chunk" || m["id"] != "chatcmpl-fake000001" {
				t.Errorf("chunk %d = %v, want a chat.completion.chunk of chatcmpl-fake000001", i, m)
			}
			u, has := m["usage"]
			if has != includeUsage {
				t.Errorf("chunk %d has usage: %v, want %v", i, has, includeUsage)
			}
			if u != nil {
				usage = append(usage, u)
			}
			for _, c := range m["choices"].([]any) {
				c := c.(map[string]any)
				d := c["delta"].(map[string]any)
				if s, ok := d["content"].(string); ok {
					text += s
				}
				if s, ok := c["finish_reason"].(string); ok {
					finish = s
				}
			}
		}
		if text != "the quick brown" || finish != "stop" {
			t.Errorf("stream text, finish = %q, %q; want %q, stop", text, finish, "the quick brown")
		}
		var want []any
		if includeUsage {
			want = []any{openAIUsageMap(11, 3, 0, 0)}
			if got := decodeMap(t, []byte(events[len(events)-2].data))["choices"]; !cmp.Equal(got, []any{}) {
				t.Errorf("usage chunk choices = %v, want []", got)
			}
		}
		if diff := cmp.Diff(want, usage); diff != "" {
			t.Errorf("include_usage=%v: usage mismatch (-want +got):\n%s", includeUsage, diff)
		}
	}
}

func TestAnthropicStream(t *testing.T) {
	p := newTestProvider(t, Config{Style: Anthropic}, newClock())
	w := post(p, Anthropic, streamBody(Anthropic, false), PromptTokensHeader, "11")
	if w.Code != http.StatusOK {
		t.Fatalf("stream = %d %s, want 200", w.Code, w.Body)
	}
	events := parseSSE(t, w.Body.String())
	var names []string
	var text string
	for _, ev := range events {
		names = append(names, ev.name)
		var m struct {
			Type    string
			Message struct{ Usage map[string]int64 }
			Delta   struct {
				Text       string
				StopReason string `json:"stop_reason"`
			}
			Usage map[string]int64
		}
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil || m.Type != ev.name {
			t.Fatalf("event %q data %s: type %q, error %v; want type = event name", ev.name, ev.data, m.Type, err)
		}
		switch ev.name {
		case "message_start":
			wantUsage := map[string]int64{"input_tokens": 11, "output_tokens": 1,
				"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
			if diff := cmp.Diff(wantUsage, m.Message.Usage); diff != "" {
				t.Errorf("message_start usage mismatch (-want +got):\n%s", diff)
			}
		case "content_block_delta":
			text += m.Delta.Text
		case "message_delta":
			if m.Delta.StopReason != "end_turn" || m.Usage["output_tokens"] != 3 {
				t.Errorf("message_delta = %s, want end_turn and 3 output tokens", ev.data)
			}
		}
	}
	want := []string{"message_start", "content_block_start", "ping",
		"content_block_delta", "content_block_delta", "content_block_delta",
		"content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("event sequence mismatch (-want +got):\n%s", diff)
	}
	if text != "the quick brown" {
		t.Errorf("streamed text = %q, want %q", text, "the quick brown")
	}
}
