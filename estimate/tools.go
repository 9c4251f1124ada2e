package estimate

import (
	"encoding/json"
	"strings"
)

// tools returns the prompt tokens of function definitions, following the
// cookbook's num_tokens_for_tools: per function, "name:description" with a
// trailing period dropped; per top-level property, "name:type:description"
// and each enum value; plus fixed costs from toolCostsFor.
//
// The cookbook's rules stop at flat properties. Anything they do not cover
// (nested objects, array items, anyOf, $defs, ...) is counted as its raw
// JSON text, which over-estimates on purpose: the provider renders it more
// compactly, but how is not documented.
func (e *Estimator) tools(tools []Tool) int64 {
	if len(tools) == 0 {
		return 0
	}
	k := toolCostsFor(e.Encoding())
	n := k.preamble + k.funcEnd
	for _, t := range tools {
		n += k.funcInit + e.Text(t.Name+":"+strings.TrimSuffix(t.Description, "."))
		n += e.schema(t.Parameters, k)
	}
	return max(n, 0)
}

// schema returns the tokens of one function's parameter schema.
func (e *Estimator) schema(raw json.RawMessage, k toolCosts) int64 {
	if len(raw) == 0 {
		return 0
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		// Valid JSON that is not an object (Estimate has rejected invalid
		// JSON already): count it as text.
		return e.Text(string(raw))
	}
	var n int64
	for key, val := range top {
		switch key {
		case "type", "required":
			// The cookbook ignores both, and its count still matched the
			// API's with both present.
		case "properties":
			n += e.properties(val, k)
		default:
			n += e.Text(key) + e.Text(string(val))
		}
	}
	return n
}

// properties returns the tokens of a schema's "properties" object.
func (e *Estimator) properties(raw json.RawMessage, k toolCosts) int64 {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(raw, &props); err != nil {
		return e.Text(string(raw))
	}
	if len(props) == 0 {
		return 0
	}
	n := k.propInit
	for name, p := range props {
		n += k.propKey + e.property(name, p, k)
	}
	return n
}

// property returns the tokens of one property, without its propKey cost.
func (e *Estimator) property(name string, raw json.RawMessage, k toolCosts) int64 {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return e.Text(name + ":" + string(raw))
	}
	desc := strings.TrimSuffix(jsonText(fields["description"]), ".")
	n := e.Text(name + ":" + jsonText(fields["type"]) + ":" + desc)
	for key, val := range fields {
		switch key {
		case "type", "description":
		case "enum":
			n += e.enum(val, k)
		default:
			n += e.Text(key) + e.Text(string(val))
		}
	}
	return n
}

// enum returns the tokens of a property's enum list.
func (e *Estimator) enum(raw json.RawMessage, k toolCosts) int64 {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return e.Text(string(raw))
	}
	n := k.enumInit
	for _, it := range items {
		n += k.enumItem + e.Text(jsonText(it))
	}
	return n
}

// jsonText returns a JSON string's value, or any other JSON value's text
// (a type list such as ["string","null"], a number in an enum).
func jsonText(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}
