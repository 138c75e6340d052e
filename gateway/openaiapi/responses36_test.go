package openaiapi

import (
	"errors"
	"testing"
)

// previous_response_id, which routes a Responses follow-up, is a string
// when present (null: absent); any other type is a 400 naming it, and so
// is a case variant or a second copy of it (the member-set rules).
func TestParseResponsesPreviousResponseID36(t *testing.T) {
	r, err := ParseResponses([]byte(`{"model":"m","input":"hi","previous_response_id":"resp_1"}`))
	if err != nil || r.PreviousResponseID != "resp_1" {
		t.Fatalf("got %+v, %v", r, err)
	}
	if r, err := ParseResponses([]byte(`{"model":"m","previous_response_id":null}`)); err != nil || r.PreviousResponseID != "" {
		t.Fatalf("null: %+v, %v", r, err)
	}
	for _, body := range []string{
		`{"model":"m","previous_response_id":7}`,
		`{"model":"m","previous_response_id":{"id":"resp_1"}}`,
		`{"model":"m","previous_response_id":["resp_1"]}`,
		`{"model":"m","previous_response_id":true}`,
		`{"model":"m","Previous_Response_Id":"resp_1"}`,
		`{"model":"m","previous_response_id":"resp_1","previous_response_id":"resp_2"}`,
	} {
		_, err := ParseResponses([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Code != CodeInvalidRequest || e.Param == nil {
			t.Errorf("%s: %v, want a 400 invalid_request naming the param", body, err)
			continue
		}
		if p := *e.Param; p != "previous_response_id" && p != "Previous_Response_Id" {
			t.Errorf("%s: param %q", body, p)
		}
	}
}
