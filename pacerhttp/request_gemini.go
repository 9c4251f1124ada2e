package pacerhttp

import (
	"encoding/json"
	"errors"

	"github.com/llmpacer/llmpacer/estimate"
)

// geminiBody is a generateContent request. Gemini's REST API follows the
// proto3 JSON mapping, which accepts lowerCamelCase and the original
// snake_case names alike; the Google SDKs send camelCase, hand-written
// clients often snake_case, so the fields that matter are read in both.
// The model is in the URL, not the body.
type geminiBody struct {
	Model             string          `json:"model"`
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	SystemSnake       *geminiContent  `json:"system_instruction"`
	Tools             []geminiTool    `json:"tools"`
	GenerationConfig  *geminiConfig   `json:"generationConfig"`
	ConfigSnake       *geminiConfig   `json:"generation_config"`
}

// geminiContent is one turn, or the system instruction.
type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

// geminiPart is one part. Text counts; a function call counts its name and
// arguments, a function response its JSON; inline and file data (images,
// audio, PDFs) are not text and are not counted.
type geminiPart struct {
	Text                string          `json:"text"`
	FunctionCall        *geminiFunction `json:"functionCall"`
	FunctionCallSnake   *geminiFunction `json:"function_call"`
	FunctionResponse    *geminiFunction `json:"functionResponse"`
	FunctionRespSnake   *geminiFunction `json:"function_response"`
	ExecutableCode      *geminiCode     `json:"executableCode"`
	CodeExecutionResult *geminiCode     `json:"codeExecutionResult"`
}

// geminiFunction is a functionCall (args) or a functionResponse
// (response).
type geminiFunction struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Args     json.RawMessage `json:"args"`
	Response json.RawMessage `json:"response"`
}

// geminiCode is code the model ran, or its output.
type geminiCode struct {
	Code   string `json:"code"`
	Output string `json:"output"`
}

// geminiTool is a tools[] entry; only function declarations have text.
// Built-in tools (googleSearch, codeExecution, ...) are not counted.
type geminiTool struct {
	FunctionDeclarations []geminiDeclaration `json:"functionDeclarations"`
	DeclarationsSnake    []geminiDeclaration `json:"function_declarations"`
}

// geminiDeclaration is a function definition. Its schema comes either as
// an OpenAPI subset (parameters) or as JSON Schema (parametersJsonSchema).
type geminiDeclaration struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	JSONSchema  json.RawMessage `json:"parametersJsonSchema"`
}

// geminiConfig holds the output cap. maxOutputTokens covers thinking
// tokens too, and each of candidateCount candidates may use all of it.
type geminiConfig struct {
	MaxOutputTokens *int64 `json:"maxOutputTokens"`
	MaxOutputSnake  *int64 `json:"max_output_tokens"`
	CandidateCount  *int64 `json:"candidateCount"`
	CandidatesSnake *int64 `json:"candidate_count"`
}

// parseGemini reads a generateContent or streamGenerateContent body.
func parseGemini(c *call, body []byte, est func(string) *estimate.Estimator) error {
	var b geminiBody
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	if b.Contents == nil {
		return errors.New("no contents")
	}
	c.Model = modelOr(b.Model, c.Model)

	var msgs []estimate.Message
	if sys := firstNonNil(b.SystemInstruction, b.SystemSnake); sys != nil {
		m := sys.message()
		m.Role = "system"
		msgs = append(msgs, m)
	}
	for i := range b.Contents {
		msgs = append(msgs, b.Contents[i].message())
	}
	var tools []estimate.Tool
	for _, t := range b.Tools {
		for _, list := range [][]geminiDeclaration{t.FunctionDeclarations, t.DeclarationsSnake} {
			for _, d := range list {
				tool := estimate.Tool{Name: d.Name, Description: d.Description}
				if !isNull(d.Parameters) {
					tool.Parameters = d.Parameters
				} else if !isNull(d.JSONSchema) {
					tool.Parameters = d.JSONSchema
				}
				tools = append(tools, tool)
			}
		}
	}
	c.Prompt = promptTokens(est(c.Model), msgs, tools)

	if g := firstNonNil(b.GenerationConfig, b.ConfigSnake); g != nil {
		if m := firstNonNil(g.MaxOutputTokens, g.MaxOutputSnake); m != nil {
			return c.setCap(*m, deref(firstNonNil(g.CandidateCount, g.CandidatesSnake)))
		}
	}
	return nil
}

// message converts a turn for package estimate.
func (g *geminiContent) message() estimate.Message {
	m := estimate.Message{Role: g.Role}
	for i := range g.Parts {
		p := &g.Parts[i]
		if p.Text != "" {
			m.Parts = append(m.Parts, p.Text)
		}
		if f := firstNonNil(p.FunctionCall, p.FunctionCallSnake); f != nil {
			m.ToolCalls = append(m.ToolCalls, estimate.ToolCall{ID: f.ID, Name: f.Name, Arguments: rawText0(f.Args)})
		}
		if f := firstNonNil(p.FunctionResponse, p.FunctionRespSnake); f != nil {
			m.Parts = append(m.Parts, f.Name, rawText0(f.Response))
		}
		for _, code := range []*geminiCode{p.ExecutableCode, p.CodeExecutionResult} {
			if code != nil {
				m.Parts = append(m.Parts, code.Code, code.Output)
			}
		}
	}
	return m
}

// rawText0 returns raw JSON as text, or "" for null.
func rawText0(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	return string(raw)
}

// firstNonNil returns a if it is set, else b: the camelCase spelling wins
// when a body holds both.
func firstNonNil[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}
