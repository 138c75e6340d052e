package anthropicapi

import (
	"time"

	"github.com/iop-gateway/iop/gateway/openaiapi"
)

// imageBytes is what an image counts for in CountTokens, as a non-text part
// does in openaiapi: its encoded size says nothing about its token cost.
const imageBytes = 1024

// CountTokens estimates the request's input tokens the way the OpenAI
// surface does (openaiapi.EstimateTokens): one token per 4 bytes of system
// text, message text, tool_use names and inputs, tool_result text and tool
// definitions (name, description, schema), 256 per image, plus 4 per
// message (the system prompt counting as one). It is tokenizer-free and
// crude by design; it answers count_tokens and fills message_start.
func CountTokens(r *Request) int {
	n, msgs := 0, len(r.messages)
	for _, s := range r.system {
		n += len(s)
	}
	if len(r.system) > 0 {
		msgs++
	}
	for _, m := range r.messages {
		for _, b := range m.blocks {
			n += blockBytes(b)
		}
	}
	for _, t := range r.tools {
		n += len(t.name) + len(t.description) + len(t.schema)
	}
	return openaiapi.EstimateTokens(n, msgs)
}

func blockBytes(b block) int {
	switch b.typ {
	case blockText:
		return len(b.text)
	case blockImage:
		return imageBytes
	case blockToolUse:
		return len(b.name) + len(b.input)
	case blockToolResult:
		n := 0
		for _, c := range b.content {
			n += blockBytes(c)
		}
		return n
	}
	return 0
}

// CountTokensResponse renders the count_tokens answer {"input_tokens":n}.
func CountTokensResponse(inputTokens int) []byte {
	return mustMarshal(struct {
		InputTokens int `json:"input_tokens"`
	}{max(inputTokens, 0)})
}

type modelOut struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

type modelListOut struct {
	Data    []modelOut `json:"data"`
	HasMore bool       `json:"has_more"`
	FirstID *string    `json:"first_id"`
	LastID  *string    `json:"last_id"`
}

// ModelsList renders Anthropic's GET /v1/models list for ids, in the order
// given: {"data":[{"type":"model","id","display_name","created_at"}, …],
// "has_more":false,"first_id","last_id"} (first_id and last_id null when
// there are none). display_name is the id (the edge's names are its
// aliases); created_at is created in RFC 3339 UTC.
func ModelsList(ids []string, created time.Time) []byte {
	l := modelListOut{Data: make([]modelOut, 0, len(ids))}
	at := created.UTC().Format(time.RFC3339)
	for _, id := range ids {
		l.Data = append(l.Data, modelOut{Type: "model", ID: id, DisplayName: id, CreatedAt: at})
	}
	if len(ids) > 0 {
		l.FirstID, l.LastID = &ids[0], &ids[len(ids)-1]
	}
	return mustMarshal(l)
}

// ModelObject renders GET /v1/models/{id} in Anthropic's shape.
func ModelObject(id string, created time.Time) []byte {
	return mustMarshal(modelOut{Type: "model", ID: id, DisplayName: id, CreatedAt: created.UTC().Format(time.RFC3339)})
}
