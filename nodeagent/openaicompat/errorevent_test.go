package openaicompat

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// vllmDecoderPromptError is what vLLM streams, with status 200 already
// sent, when its engine refuses the prompt on the first read of the result
// generator (a multimodal prompt whose image tokens the server could not
// count up front): create_streaming_error_response of a ValueError, which
// carries the status it would have answered with in "code".
const vllmDecoderPromptError = `data: {"error":{"message":"The decoder prompt (length 9120) is longer than the maximum model length of 8192. Make sure that ` + "`max_model_len`" + ` is no smaller than the number of text tokens plus multimodal tokens.","type":"BadRequestError","param":null,"code":400}}` + "\n\n"

// TestStreamErrorEventKeepsItsStatus: an error event that says which HTTP
// status it stands for is classified by that status, as the same error
// answered before the stream would be: a 400 is the request's fault
// (invalid_request, which the edge neither retries elsewhere nor answers
// with a 502 that SDKs retry), a 5xx stays an upstream failure.
func TestStreamErrorEventKeepsItsStatus(t *testing.T) {
	cases := []struct {
		name   string
		event  string
		code   iop.ErrorCode
		status int
	}{
		{"vllm 400", vllmDecoderPromptError, adapter.CodeInvalidRequest, http.StatusBadRequest},
		{"vllm before 0.10, 400", `data: {"object":"error","message":"bad prompt","type":"BadRequestError","param":null,"code":400}` + "\n\n",
			adapter.CodeInvalidRequest, http.StatusBadRequest},
		{"vllm 500", `data: {"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}}` + "\n\n",
			adapter.CodeUpstream, 0},
		{"openai string code", `data: {"error":{"message":"The server had an error","type":"server_error","param":null,"code":"server_error"}}` + "\n\n",
			adapter.CodeUpstream, 0},
		{"litellm string 400", `data: {"error":{"message":"bad prompt","type":"invalid_request_error","param":null,"code":"400"}}` + "\n\n",
			adapter.CodeInvalidRequest, http.StatusBadRequest},
		{"litellm string 429", `data: {"error":{"message":"Rate limit reached","type":"throttling_error","param":null,"code":"429"}}` + "\n\n",
			adapter.CodeUpstream, http.StatusTooManyRequests},
		{"string not three digits", `data: {"error":{"message":"x","type":"x","code":"0400"}}` + "\n\n",
			adapter.CodeUpstream, 0},
		{"code out of range", `data: {"error":{"message":"x","type":"BadRequestError","code":99999999999999999999}}` + "\n\n",
			adapter.CodeUpstream, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				sseWrite(t, w, tc.event)
				sseWrite(t, w, vllmDone)
			})
			in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
			_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", false)}, &fakeRunSink{})
			ae := asAdapterError(t, err)
			if ae.Code != tc.code || ae.HTTPStatus != tc.status {
				t.Fatalf("code %s status %d, want %s %d (%+v)", adapter.CodeName(ae.Code), ae.HTTPStatus, adapter.CodeName(tc.code), tc.status, ae)
			}
			if ae.Message == "" {
				t.Fatal("no message")
			}
		})
	}
}

// TestWholeErrorDocumentKeepsItsStatus: the same for a 2xx JSON document
// that is an error (a server that ignored "stream").
func TestWholeErrorDocumentKeepsItsStatus(t *testing.T) {
	_, _, err := runOnce(t, adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"error":{"message":"bad prompt","type":"BadRequestError","param":null,"code":400}}`))
	})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeInvalidRequest || ae.HTTPStatus != http.StatusBadRequest || ae.Message != "bad prompt" {
		t.Fatalf("error %+v", ae)
	}
}
