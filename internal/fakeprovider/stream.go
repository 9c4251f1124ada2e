package fakeprovider

import (
	"encoding/json"
	"io"
	"net/http"
)

// event is one Server-Sent Event of a streamed answer. An empty name
// writes a bare data line, as OpenAI's chat and Gemini do.
type event struct {
	name string
	data any // marshalled to JSON, except a rawData
}

// rawData is event data written as it is, such as OpenAI's [DONE].
type rawData string

// sse writes Server-Sent Events and flushes each one, so a client sees
// the stream arrive piece by piece. A failed write means the client has
// gone; the call is charged either way, so errors are dropped.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// send writes one event.
func (s sse) send(ev event) {
	data, ok := ev.data.(rawData)
	if !ok {
		b, err := json.Marshal(ev.data)
		if err != nil {
			return
		}
		data = rawData(b)
	}
	if ev.name != "" {
		_, _ = io.WriteString(s.w, "event: "+ev.name+"\n")
	}
	_, _ = io.WriteString(s.w, "data: "+string(data)+"\n\n")
	_ = s.rc.Flush()
}

// writeStream writes the 200 of an admitted call that asked for a stream.
// The rate-limit headers come first, as with any answer. A call that
// CutStreams picked stops after d.cut events, never with its last one,
// and the connection is then closed abruptly.
func writeStream(w http.ResponseWriter, style Style, c call, d decision) {
	h := w.Header()
	setRateHeaders(h, style, d.limits)
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := sse{w: w, rc: http.NewResponseController(w)}
	events := streamEvents(c, d)
	if d.cut >= 0 {
		events = events[:min(d.cut, len(events)-1)]
	}
	for _, ev := range events {
		s.send(ev)
	}
	if d.cut >= 0 {
		abort()
	}
}

// streamEvents are the events of the whole streamed answer to c.
func streamEvents(c call, d decision) []event {
	switch c.ep {
	case Messages:
		return anthropicEvents(c, d)
	case Responses:
		return responseEvents(c, d)
	case StreamGenerateContent:
		return geminiEvents(c, d)
	}
	return openAIChunks(c, d)
}
