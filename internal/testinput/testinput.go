// Package testinput builds normalized run inputs (iop.RunInput) from
// OpenAI-shaped JSON for tests, with the edge's own normalizer, so node
// tests feed adapters exactly what the edge sends.
package testinput

import (
	"fmt"

	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// For normalizes body as the edge does for operation op. It panics on a
// body the normalizer refuses: tests pass fixed, valid documents.
func For(op iop.RunOperation, body string) *iop.RunInput {
	var (
		in  *iop.RunInput
		err error
	)
	switch op {
	case iop.RunOperation_RUN_OPERATION_COMPLETION:
		in, err = openaiapi.NormalizeCompletion([]byte(body))
	case iop.RunOperation_RUN_OPERATION_EMBEDDING:
		in, err = openaiapi.NormalizeEmbedding([]byte(body))
	default:
		in, err = openaiapi.NormalizeChat([]byte(body))
	}
	if err != nil {
		panic(fmt.Sprintf("testinput: %s: %v", body, err))
	}
	return in
}

// Chat is For(chat, body).
func Chat(body string) *iop.RunInput { return For(iop.RunOperation_RUN_OPERATION_CHAT, body) }
