package fakeprovider

import (
	"net/http"
	"time"
)

// listed are the models every models list names, per style.
var listed = map[Style][]string{
	OpenAI:    {"gpt-4o", "gpt-4o-mini", "text-embedding-3-small"},
	Anthropic: {"claude-sonnet-4-5", "claude-haiku-4-5"},
	Gemini:    {"gemini-2.5-flash", "gemini-2.5-pro"},
}

// modelsCreated is the creation time the lists report for every model.
var modelsCreated = time.Date(2024, 5, 13, 0, 0, 0, 0, time.UTC)

// writeModels answers a models list in the shape of the style, with the
// rate-limit headers every answer carries.
func writeModels(w http.ResponseWriter, style Style, ls limitState) {
	setRateHeaders(w.Header(), style, ls)
	type obj = map[string]any
	var data []obj
	for _, id := range listed[style] {
		switch style {
		case Anthropic:
			data = append(data, obj{"type": "model", "id": id, "display_name": id,
				"created_at": modelsCreated.Format(time.RFC3339)})
		case Gemini:
			data = append(data, obj{"name": "models/" + id, "displayName": id,
				"supportedGenerationMethods": []string{"generateContent", "countTokens"}})
		default:
			data = append(data, obj{"id": id, "object": "model", "created": modelsCreated.Unix(), "owned_by": "system"})
		}
	}
	var body obj
	switch style {
	case Anthropic:
		body = obj{"data": data, "has_more": false, "first_id": data[0]["id"], "last_id": data[len(data)-1]["id"]}
	case Gemini:
		body = obj{"models": data}
	default:
		body = obj{"object": "list", "data": data}
	}
	writeJSON(w, http.StatusOK, body)
}
