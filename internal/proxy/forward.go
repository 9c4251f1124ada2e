package proxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/pacerhttp"
)

// bodyTimeout bounds how long a client may take to send a model call's
// body: a slow client must not hold the proxy's memory for ever.
const bodyTimeout = time.Minute

// forward sends r to rt's provider: a model call through its budget, any
// other request as it is. It returns the budget's name, for the log.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, rt *route) string {
	if err := checkPath(r.URL.EscapedPath()); err != nil {
		rt.style.write(w, refusal{status: http.StatusBadRequest, kind: kindInvalid, msg: err.Error()})
		return ""
	}
	if rt.style == gemini {
		keyFromQuery(r)
	}
	key := apiKey(r.Header, rt.style)
	c, tenant := p.clients[key]
	if tenant {
		if c.provider != rt.name {
			rt.style.write(w, refusal{status: http.StatusUnauthorized, kind: kindInvalid,
				msg: fmt.Sprintf("llmpacer proxy: this proxy key is for /%s/, not /%s/", c.provider, rt.name)})
			return ""
		}
		key = c.key
		setKey(r.Header, rt.style, key)
	}
	if !pacerhttp.Paced(r) {
		rt.rp.ServeHTTP(w, r)
		return ""
	}
	body, ok := p.readBody(w, r, rt)
	if !ok {
		return ""
	}
	if key == "" {
		// The provider refuses it, at no cost to any budget.
		rt.rp.ServeHTTP(w, r)
		return ""
	}
	model := pacerhttp.PathModel(r) // Gemini's model, Azure's deployment
	var err error
	if model == "" {
		model, err = modelOf(body)
	}
	if err != nil {
		rt.style.write(w, refusal{status: http.StatusBadRequest, kind: kindInvalid, msg: err.Error()})
		return ""
	}
	b, err := p.budget(rt.name, key, model)
	if err != nil {
		p.failed(w, r, rt, err)
		return ""
	}
	defer b.done()
	ctx := context.WithValue(r.Context(), budgetKey{}, b)
	if tenant {
		ctx = pacerhttp.ContextWithTenant(ctx, c.tenant)
	}
	rt.rp.ServeHTTP(w, r.WithContext(pacerhttp.ContextWithMaxWait(ctx, p.cfg.MaxWait)))
	return b.name
}

// readBody reads a model call's body, at most MaxBody bytes within
// bodyTimeout, and puts it back replayable. A larger body is answered 413,
// a failed read 400, and ok is then false.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request, rt *route) (body []byte, ok bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	defer rc.SetReadDeadline(time.Time{})
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		rt.style.write(w, refusal{status: http.StatusRequestEntityTooLarge, kind: kindTooLarge,
			msg: fmt.Sprintf("llmpacer proxy: the request body is larger than %d bytes, the proxy's limit (-max-body); send a smaller request or raise the limit", p.cfg.MaxBody)})
		return nil, false
	case err != nil:
		rt.style.write(w, refusal{status: http.StatusBadRequest, kind: kindInvalid,
			msg: "llmpacer proxy: the request body could not be read: " + err.Error()})
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	return body, true
}

// keyHeader is the header a provider of style s reads its key from, beside
// Authorization: Bearer.
func keyHeader(s style) string {
	switch s {
	case azure:
		return "Api-Key"
	case gemini:
		return "X-Goog-Api-Key"
	}
	return "X-Api-Key"
}

// apiKey returns the provider key the client sent: as Authorization:
// Bearer or in the provider's own header (x-api-key, Azure's api-key,
// Gemini's x-goog-api-key), the same key either way. Sent both ways, the
// header the provider of style s reads first wins: the budget must be the
// key the provider charges.
func apiKey(h http.Header, s style) string {
	x := strings.TrimSpace(h.Get(keyHeader(s)))
	if s != anthropic && x == "" {
		x = strings.TrimSpace(h.Get("X-Api-Key")) // as the proxy takes any key
	}
	var bearer string
	if scheme, k, ok := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "Bearer") {
		bearer = strings.TrimSpace(k)
	}
	if s == openAI {
		return cmp.Or(bearer, x)
	}
	return cmp.Or(x, bearer)
}

// setKey puts the provider key the proxy holds in place of the proxy key
// the client sent, as the provider takes it.
func setKey(h http.Header, s style, key string) {
	h.Del("Authorization")
	h.Del("X-Api-Key")
	h.Del(keyHeader(s))
	if s == openAI {
		h.Set("Authorization", "Bearer "+key)
		return
	}
	h.Set(keyHeader(s), key)
}

// keyFromQuery moves a Gemini key sent as ?key= into its header: the key
// then never shows in a URL the proxy might log or an error might quote.
func keyFromQuery(r *http.Request) {
	q := r.URL.Query()
	k := q.Get("key")
	if k == "" {
		return
	}
	q.Del("key")
	r.URL.RawQuery = q.Encode()
	if r.Header.Get("X-Goog-Api-Key") == "" {
		r.Header.Set("X-Goog-Api-Key", k)
	}
}

// modelOf returns the "model" of a model call's JSON body: both OpenAI's
// and Anthropic's APIs require it, and the budget is the key's and the
// model's.
func modelOf(body []byte) (string, error) {
	var v struct {
		Model *string `json:"model"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", errors.New(`llmpacer proxy: the request body is not a JSON object; send the provider's JSON request with its "model"`)
	}
	if v.Model == nil || *v.Model == "" {
		return "", errors.New(`llmpacer proxy: the request body has no "model"; name the model to call`)
	}
	return *v.Model, nil
}

// checkPath refuses a path with a ".." segment, plain or percent-encoded
// (once or twice, with '/' or '\' encoded inside it too): the provider or
// a gateway before it may resolve it, and the call would reach another
// path than the one the proxy paced or passed.
func checkPath(escaped string) error {
	s := escaped
	for range 3 {
		for _, seg := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
			if seg == ".." {
				return errors.New(`llmpacer proxy: the path has a ".." segment; it is refused, never forwarded`)
			}
		}
		u, err := url.PathUnescape(s)
		if err != nil {
			return errors.New("llmpacer proxy: the path has a malformed percent-escape")
		}
		if u == s {
			return nil
		}
		s = u
	}
	return errors.New("llmpacer proxy: the path is percent-encoded more than twice; it is refused")
}
