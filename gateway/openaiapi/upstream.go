package openaiapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/iop-gateway/iop/internal/jsonenc"
)

// maxUpstreamMessage bounds how much of an upstream's own error text is kept
// in a wrapped envelope.
const maxUpstreamMessage = 1024

// NormalizeUpstreamError makes an upstream's non-streamed error answer
// (status >= 400) something every OpenAI SDK decodes as a typed API error:
//
//   - 401 and 403 become 502 upstream_error: the client's key was accepted
//     by the edge; it is the node's provider credential that failed, and a
//     401 would send the client checking its own key.
//   - a body that already is the OpenAI envelope ({"error":{"message":…}}
//     with string or null type, param and code) passes through unchanged,
//     status kept.
//   - any other JSON body ({"error":"…"} from Ollama-style servers,
//     {"object":"error","message":…,"code":400} from older vLLM,
//     {"detail":…} from FastAPI) is wrapped in the envelope, keeping the
//     status and the upstream's message.
//   - a body that is not JSON gets the envelope with a generic message (the
//     upstream's text when it is short plain text).
//
// It returns the status and body to send; the body is always the envelope
// (application/json).
func NormalizeUpstreamError(status int, contentType string, body []byte) (int, []byte) {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return http.StatusBadGateway, UpstreamError(fmt.Sprintf(
			"The provider rejected the node's credentials (HTTP %d); the node's provider key needs attention.", status)).Envelope()
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err == nil && obj != nil {
		if isEnvelope(obj) {
			if utf8.Valid(body) {
				return status, body
			}
			// JSON is UTF-8 (RFC 8259), and strict decoders refuse
			// anything else: the envelope is re-encoded, each invalid
			// byte becoming U+FFFD as encoding/json read it.
			if out, ok := reencode(body); ok {
				return status, out
			}
		}
		if msg, ok := upstreamMessage(obj); ok {
			return status, wrapUpstream(status, msg, stringField(obj, "type"), stringField(obj, "code"))
		}
		return status, wrapUpstream(status, fmt.Sprintf("The provider answered HTTP %d.", status), "", "")
	}
	msg := fmt.Sprintf("The provider answered HTTP %d.", status)
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "text/plain" {
		if t := strings.TrimSpace(string(body)); t != "" && len(t) <= maxUpstreamMessage && utf8.ValidString(t) {
			msg = t
		}
	}
	return status, wrapUpstream(status, msg, "", "")
}

// reencode is the JSON document body (valid) encoded afresh: strings as
// valid UTF-8, numbers as written.
func reencode(body []byte) ([]byte, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, false
	}
	out, err := jsonenc.Marshal(v)
	return out, err == nil
}

// isEnvelope reports whether obj is {"error":{"message":"…",…}} with every
// field an SDK decodes into a string being a string or null.
func isEnvelope(obj map[string]json.RawMessage) bool {
	raw, ok := obj["error"]
	if !ok {
		return false
	}
	var inner map[string]json.RawMessage
	if json.Unmarshal(raw, &inner) != nil || inner == nil {
		return false
	}
	if _, ok := stringValue(inner["message"]); !ok {
		return false
	}
	for _, k := range []string{"type", "param", "code"} {
		if v, present := inner[k]; present && !isNull(v) {
			if _, ok := stringValue(v); !ok {
				return false
			}
		}
	}
	return true
}

// upstreamMessage finds the upstream's human message in the shapes
// OpenAI-style servers use when they do not use the envelope.
func upstreamMessage(obj map[string]json.RawMessage) (string, bool) {
	if raw, ok := obj["error"]; ok {
		if s, ok := stringValue(raw); ok && s != "" {
			return truncateForMessage(s), true
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) == nil {
			if s, ok := stringValue(inner["message"]); ok && s != "" {
				return truncateForMessage(s), true
			}
		}
	}
	for _, k := range []string{"message", "detail", "msg"} {
		if s, ok := stringValue(obj[k]); ok && s != "" {
			return truncateForMessage(s), true
		}
	}
	// FastAPI validation errors: {"detail":[{"msg":…},…]}.
	var details []map[string]json.RawMessage
	if json.Unmarshal(obj["detail"], &details) == nil && len(details) > 0 {
		if s, ok := stringValue(details[0]["msg"]); ok && s != "" {
			return truncateForMessage(s), true
		}
	}
	return "", false
}

// wrapUpstream builds the envelope for an upstream error of status. The
// upstream's type is kept when it is a string; the code is the upstream's
// string code, else the one the edge uses for that class of status.
func wrapUpstream(status int, msg, typ, code string) []byte {
	if typ == "" {
		switch {
		case status == http.StatusTooManyRequests:
			typ = TypeRateLimit
		case status >= 400 && status < 500:
			typ = TypeInvalidRequest
		default:
			typ = TypeServer
		}
	}
	if code == "" {
		if status >= 400 && status < 500 && status != http.StatusTooManyRequests {
			code = CodeInvalidRequest
		} else {
			code = CodeUpstreamError
		}
	}
	return mustMarshal(envelope{Error: envelopeBody{Message: msg, Type: typ, Code: code}})
}

func stringField(obj map[string]json.RawMessage, k string) string {
	s, _ := stringValue(obj[k])
	if len(s) > 64 {
		return ""
	}
	return s
}

func stringValue(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// ValidStatus reports whether a status an upstream (through a node)
// reported can be relayed: net/http panics on codes outside 100–999 and
// anything outside 100–599 is not HTTP.
func ValidStatus(code int32) bool { return code >= 100 && code <= 599 }
