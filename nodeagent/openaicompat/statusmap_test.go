package openaicompat

import (
	"io"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// TestUnprocessableIsInvalidRequest: a 422 (FastAPI's validation error, as
// TGI and other Python servers answer a request they cannot take) is the
// caller's request at fault, like a 400: invalid_request with the
// server's own explanation, not an upstream failure.
func TestUnprocessableIsInvalidRequest(t *testing.T) {
	_, _, err := runOnce(t, adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"detail":[{"type":"less_than_equal","loc":["body","temperature"],"msg":"Input should be less than or equal to 2","input":9}]}`)
	})
	ae := asAdapterError(t, err)
	if ae.Code != adapter.CodeInvalidRequest || ae.HTTPStatus != http.StatusUnprocessableEntity ||
		ae.Message != "body.temperature: Input should be less than or equal to 2" {
		t.Fatalf("error %+v", ae)
	}
}
