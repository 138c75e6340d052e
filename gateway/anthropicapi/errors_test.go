package anthropicapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTypeForStatus(t *testing.T) {
	cases := map[int]string{
		400: TypeInvalidRequest, 401: TypeAuthentication, 403: TypePermission, 404: TypeNotFound,
		413: TypeRequestTooLarge, 429: TypeRateLimit, 500: TypeAPI, 502: TypeAPI, 504: TypeTimeout,
		402: TypeBilling,
		503: TypeOverloaded, 529: TypeOverloaded, 409: TypeInvalidRequest, 422: TypeInvalidRequest,
		200: TypeAPI, 0: TypeAPI,
	}
	for status, want := range cases {
		if got := TypeForStatus(status); got != want {
			t.Errorf("TypeForStatus(%d) = %s, want %s", status, got, want)
		}
	}
}

func TestFromOpenAIError(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   Error
	}{
		{"envelope kept", 400, `{"error":{"message":"bad temperature","type":"invalid_request_error","param":null,"code":"invalid_request"}}`,
			Error{400, TypeInvalidRequest, "bad temperature"}},
		{"404 model", 404, `{"error":{"message":"The model 'x' does not exist.","type":"invalid_request_error","code":"model_not_found"}}`,
			Error{404, TypeNotFound, "The model 'x' does not exist."}},
		{"429", 429, `{"error":{"message":"slow down","type":"rate_limit_error","code":"queue_full"}}`,
			Error{429, TypeRateLimit, "slow down"}},
		{"503", 503, `{"error":{"message":"none","type":"server_error","code":"no_provider_available"}}`,
			Error{503, TypeOverloaded, "none"}},
		{"old vllm flat shape", 400, `{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}`,
			Error{400, TypeInvalidRequest, "too long"}},
		{"html page never echoed", 502, `<html><body>nginx secret-host:8080</body></html>`,
			Error{502, TypeAPI, "The upstream provider failed."}},
		{"gateway timeout page", 504, `<html>504 Gateway Time-out</html>`,
			Error{504, TypeTimeout, "The provider did not answer in time."}},
		{"payment required", 402, `{"error":{"message":"Insufficient credits","code":402}}`,
			Error{402, TypeBilling, "Insufficient credits"}},
		{"json but not an envelope", 500, `{"detail":"internal trace"}`,
			Error{500, TypeAPI, "The upstream provider failed."}},
		{"message not a string", 401, `{"error":{"message":{"x":1}}}`,
			Error{401, TypeAuthentication, "Missing or invalid API key."}},
		{"empty body", 429, ``, Error{429, TypeRateLimit, "Rate limited; retry later."}},
		{"non-error status", 200, `{"error":{"message":"odd"}}`, Error{502, TypeAPI, "odd"}},
		{"stream error queue_full", 0, `{"error":{"message":"full","type":"rate_limit_error","code":"queue_full"}}`,
			Error{429, TypeRateLimit, "full"}},
		{"stream error timeout", 0, `{"error":{"message":"late","type":"server_error","code":"queue_timeout"}}`,
			Error{503, TypeOverloaded, "late"}},
		{"stream error upstream", 0, `{"error":{"message":"The provider stream ended unexpectedly.","type":"server_error","code":"upstream_error"}}`,
			Error{502, TypeAPI, "The provider stream ended unexpectedly."}},
		{"vllm stream error, numeric code", 0, `{"error":{"object":"error","message":"bad tool args","type":"BadRequestError","param":null,"code":400}}`,
			Error{400, TypeInvalidRequest, "bad tool args"}},
		{"numeric code out of range", 0, `{"error":{"message":"odd","code":200}}`, Error{502, TypeAPI, "odd"}},
		{"stream error garbage", 0, `nope`, Error{502, TypeAPI, "The upstream provider failed."}},
	}
	for _, c := range cases {
		got := FromOpenAIError(c.status, []byte(c.body))
		if *got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, *got, c.want)
		}
	}
	long := FromOpenAIError(400, []byte(`{"error":{"message":"`+strings.Repeat("é", 2000)+`"}}`))
	if len(long.Message) > maxUpstreamMessage+len("…") || !strings.HasSuffix(long.Message, "…") {
		t.Fatalf("long message not bounded: %d bytes", len(long.Message))
	}
}

func TestWriteError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/with-id":
			WriteError(w, "req_123", NewError(http.StatusNotFound, "no such model <x>"))
		case "/bad-status":
			WriteError(w, "", &Error{Status: 200, Type: TypeAPI, Message: "oops"})
		}
	}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/with-id")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || resp.Header.Get("request-id") != "req_123" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	want := `{"type":"error","error":{"type":"not_found_error","message":"no such model <x>"},"request_id":"req_123"}` + "\n"
	if string(body) != want {
		t.Fatalf("body %s", body)
	}

	resp, err = http.Get(srv.URL + "/bad-status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || resp.Header.Get("request-id") != "" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil || env["type"] != "error" || env["request_id"] != nil {
		t.Fatalf("body %s: %v", body, err)
	}
}
