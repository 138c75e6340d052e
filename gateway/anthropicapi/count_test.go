package anthropicapi

import (
	"strconv"
	"testing"
	"time"

	"github.com/iop-gateway/iop/gateway/openaiapi"
)

func TestCountTokens(t *testing.T) {
	r := mustParse(t, `{"model":"m","max_tokens":5,"system":"12345678",
		"tools":[{"name":"f","description":"dd","input_schema":{"type":"object"}}],
		"messages":[{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"i","name":"f","input":{"a": 1}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"i","content":[{"type":"text","text":"ok"}]}]}]}`)
	// system 8 + text 4 + image 1024 + tool_use 1+7 + result 2 + tool 1+2+17
	want := openaiapi.EstimateTokens(8+4+imageBytes+1+7+2+1+2+17, 4)
	if got := CountTokens(r); got != want {
		t.Fatalf("CountTokens = %d, want %d", got, want)
	}
	if got := string(CountTokensResponse(want)); got != `{"input_tokens":`+strconv.Itoa(want)+`}` {
		t.Fatal(got)
	}
	c, e := ParseCountRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"abcdefgh"}]}`))
	if e != nil || CountTokens(c) != 2+4 {
		t.Fatalf("%v %d", e, CountTokens(c))
	}
}

func TestModelsList(t *testing.T) {
	at := time.Date(2025, 2, 19, 10, 0, 0, 0, time.FixedZone("x", 3600))
	got := string(ModelsList([]string{"qwen", "claude-x"}, at))
	want := `{"data":[{"type":"model","id":"qwen","display_name":"qwen","created_at":"2025-02-19T09:00:00Z"},` +
		`{"type":"model","id":"claude-x","display_name":"claude-x","created_at":"2025-02-19T09:00:00Z"}],` +
		`"has_more":false,"first_id":"qwen","last_id":"claude-x"}`
	if got != want {
		t.Fatalf("got %s", got)
	}
	if got := string(ModelsList(nil, at)); got != `{"data":[],"has_more":false,"first_id":null,"last_id":null}` {
		t.Fatalf("empty: %s", got)
	}
	if got := string(ModelObject("qwen", at)); got != `{"type":"model","id":"qwen","display_name":"qwen","created_at":"2025-02-19T09:00:00Z"}` {
		t.Fatal(got)
	}
}
