package pacerhttp

import (
	"bytes"
	"strings"
	"testing"
)

// benchStream builds a 100-chunk stream from a fixture: its first event
// repeated, then its last ones, as a real answer of about 100 deltas.
func benchStream(b *testing.B, file, delta string, tail int) []byte {
	events := strings.SplitAfter(string(readStream(b, file)), "\n\n")
	events = events[:len(events)-1] // the empty string after the last "\n\n"
	var buf bytes.Buffer
	buf.WriteString(events[0])
	for range 100 - 1 - tail {
		buf.WriteString(delta)
	}
	for _, ev := range events[len(events)-tail:] {
		buf.WriteString(ev)
	}
	return buf.Bytes()
}

// BenchmarkStreamScanner measures the scanner on 100-chunk streams, fed
// in 512-byte reads as a transport's body reads would deliver them.
func BenchmarkStreamScanner(b *testing.B) {
	streams := []struct {
		name string
		a    api
		data []byte
	}{
		{"openai-chat-100", apiOpenAIChat, benchStream(b, "openai_chat.sse",
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", 2)},
		{"anthropic-100", apiAnthropicMessages, benchStream(b, "anthropic.sse",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word\"}}\n\n", 3)},
		{"gemini-sse-100", apiGeminiStream, benchStream(b, "gemini.sse",
			`data: {"candidates": [{"content": {"parts": [{"text": " word"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 1008,"totalTokenCount": 1008},"modelVersion": "gemini-2.5-flash"}`+"\n\n", 1)},
	}
	for _, st := range streams {
		b.Run(st.name, func(b *testing.B) {
			if _, ok := scanner(st.a, st.data).Usage(); !ok {
				b.Fatal("bench stream has no usage")
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(st.data)))
			for b.Loop() {
				s := newStreamScanner(st.a)
				for p := st.data; len(p) > 0; {
					n := min(512, len(p))
					s.Write(p[:n])
					p = p[n:]
				}
			}
		})
	}
}
