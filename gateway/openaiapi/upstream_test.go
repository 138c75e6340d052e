package openaiapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"unicode/utf8"
)

func TestNormalizeUpstreamError(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		ctype, body string
		wantStatus  int
		wantMsg     string
		wantType    string
		wantCode    string
		passthrough bool
	}{
		{name: "envelope passes", status: 400, ctype: "application/json",
			body:       `{"error":{"message":"bad temperature","type":"invalid_request_error","param":"temperature","code":null}}`,
			wantStatus: 400, wantMsg: "bad temperature", wantType: "invalid_request_error", passthrough: true},
		{name: "upstream 401 is the node's key", status: 401, ctype: "application/json", body: `{"error":"Unauthorized"}`,
			wantStatus: 502, wantType: TypeServer, wantCode: CodeUpstreamError},
		{name: "upstream 403", status: 403, ctype: "text/plain", body: "forbidden",
			wantStatus: 502, wantType: TypeServer, wantCode: CodeUpstreamError},
		{name: "ollama string error", status: 404, ctype: "application/json", body: `{"error":"model \"x\" not found"}`,
			wantStatus: 404, wantMsg: `model "x" not found`, wantType: TypeInvalidRequest, wantCode: CodeInvalidRequest},
		{name: "old vllm object error", status: 400, ctype: "application/json",
			body:       `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}`,
			wantStatus: 400, wantMsg: "max_tokens is too large", wantType: "BadRequestError", wantCode: CodeInvalidRequest},
		{name: "numeric code inside envelope is rewritten", status: 500, ctype: "application/json",
			body:       `{"error":{"message":"boom","type":"server_error","code":500}}`,
			wantStatus: 500, wantMsg: "boom", wantType: TypeServer, wantCode: CodeUpstreamError},
		{name: "fastapi detail", status: 422, ctype: "application/json", body: `{"detail":[{"loc":["body"],"msg":"field required"}]}`,
			wantStatus: 422, wantMsg: "field required", wantType: TypeInvalidRequest, wantCode: CodeInvalidRequest},
		{name: "html", status: 500, ctype: "text/html", body: "<html><body>Internal</body></html>",
			wantStatus: 500, wantMsg: "The provider answered HTTP 500.", wantType: TypeServer, wantCode: CodeUpstreamError},
		{name: "plain text kept", status: 429, ctype: "text/plain; charset=utf-8", body: "slow down\n",
			wantStatus: 429, wantMsg: "slow down", wantType: TypeRateLimit, wantCode: CodeUpstreamError},
		{name: "json without message", status: 503, ctype: "application/json", body: `{"status":"loading"}`,
			wantStatus: 503, wantMsg: "The provider answered HTTP 503.", wantType: TypeServer, wantCode: CodeUpstreamError},
		{name: "json array", status: 400, ctype: "application/json", body: `[1,2]`,
			wantStatus: 400, wantMsg: "The provider answered HTTP 400.", wantType: TypeInvalidRequest, wantCode: CodeInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, body := NormalizeUpstreamError(tc.status, tc.ctype, []byte(tc.body))
			if st != tc.wantStatus {
				t.Fatalf("status %d, want %d", st, tc.wantStatus)
			}
			if tc.passthrough && string(body) != tc.body {
				t.Fatalf("envelope was rewritten: %s", body)
			}
			var env struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatalf("not an envelope: %v: %s", err, body)
			}
			if tc.wantMsg != "" && env.Error.Message != tc.wantMsg {
				t.Fatalf("message %q, want %q", env.Error.Message, tc.wantMsg)
			}
			if env.Error.Message == "" {
				t.Fatal("empty message")
			}
			if env.Error.Type != tc.wantType {
				t.Fatalf("type %q, want %q", env.Error.Type, tc.wantType)
			}
			if tc.wantCode != "" && (env.Error.Code == nil || *env.Error.Code != tc.wantCode) {
				t.Fatalf("code %v, want %q", env.Error.Code, tc.wantCode)
			}
		})
	}
}

// An upstream envelope carrying bytes that are not UTF-8 is re-encoded,
// not relayed: JSON is UTF-8, and a strict client decoder (serde_json,
// Jackson) would fail on the error instead of reporting it.
func TestNormalizeUpstreamErrorEnvelopeNotUTF8(t *testing.T) {
	body := []byte("{\"error\":{\"message\":\"bad \xff byte\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"context_length_exceeded\",\"n\":12345678901234567890}}")
	st, out := NormalizeUpstreamError(400, "application/json", body)
	if st != 400 || !utf8.Valid(out) {
		t.Fatalf("status %d, body %q", st, out)
	}
	var env struct {
		Error struct {
			Message, Type, Code string
			Param               *string
			N                   json.Number
		}
	}
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatal(err)
	}
	e := env.Error
	if e.Message != "bad \ufffd byte" || e.Type != "invalid_request_error" || e.Code != "context_length_exceeded" || e.Param != nil || e.N != "12345678901234567890" {
		t.Fatalf("re-encoded %q", out)
	}
}

func TestValidStatus(t *testing.T) {
	for code, want := range map[int32]bool{99: false, 100: true, 200: true, 599: true, 600: false, 995: false, 1995: false, -1: false} {
		if ValidStatus(code) != want {
			t.Errorf("ValidStatus(%d) = %v", code, !want)
		}
	}
}

// FuzzNormalizeUpstreamError: whatever an upstream sends, the result is an
// envelope every SDK decodes (message, type and code strings), never a 401
// or 403, and the status is kept otherwise.
func FuzzNormalizeUpstreamError(f *testing.F) {
	f.Add(400, "application/json", []byte(`{"error":{"message":"x","type":"t","param":null,"code":"c"}}`))
	f.Add(401, "application/json", []byte(`{"error":"Unauthorized"}`))
	f.Add(500, "text/plain", []byte("oops"))
	f.Add(429, "application/json", []byte(`{"object":"error","message":"m","code":429}`))
	f.Add(422, "application/json", []byte(`{"detail":[{"msg":"x"}]}`))
	f.Add(503, "", []byte{0xff, 0xfe})
	f.Fuzz(func(t *testing.T, status int, ctype string, body []byte) {
		if status < 400 || status > 599 {
			return
		}
		st, out := NormalizeUpstreamError(status, ctype, body)
		if st == http.StatusUnauthorized || st == http.StatusForbidden {
			t.Fatalf("status %d kept", st)
		}
		if status != 401 && status != 403 && st != status {
			t.Fatalf("status %d became %d", status, st)
		}
		var env struct {
			Error struct {
				Message string  `json:"message"`
				Type    *string `json:"type"`
				Code    *string `json:"code"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out, &env); err != nil {
			t.Fatalf("not an envelope: %v: %q", err, out)
		}
		if !utf8.Valid(out) {
			t.Fatalf("invalid UTF-8: %q", out)
		}
	})
}
