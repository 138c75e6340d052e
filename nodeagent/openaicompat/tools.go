package openaicompat

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/iop-gateway/iop/internal/jsonenc"
	"github.com/iop-gateway/iop/nodeagent/adapter/texttool"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// rejectsTools reports whether an upstream error is the backend refusing
// native tools (vLLM without --enable-auto-tool-choice, servers that do not
// know the fields, models without tool templates). It looks at the parsed
// message only, never at the raw body, and skips statuses that say nothing
// about the request's shape (auth, missing model, rate limits).
func rejectsTools(ue upstreamError) bool {
	switch ue.status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return ue.status >= 400 && ue.status < 500 &&
		strings.Contains(strings.ToLower(ue.message), "tool")
}

// textToolInput is the text tool-call form of a chat input (texttool.Input).
func textToolInput(in *iop.RunInput) (*iop.RunInput, bool) { return texttool.Input(in) }

// toolInstruction is the instruction textToolInput adds (texttool.Instruction).
func toolInstruction(in *iop.RunInput) string { return texttool.Instruction(in) }

func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return ""
	}
	return buf.String()
}

// mustJSON encodes values that cannot fail to encode (strings, maps of
// strings, raw JSON already validated), HTML escaping off.
func mustJSON(v any) json.RawMessage { return jsonenc.Must("openaicompat", v) }
