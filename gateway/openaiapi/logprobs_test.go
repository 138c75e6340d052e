package openaiapi

import "testing"

// A run carries no token log probabilities and echoes no prompt, so a
// request asking for either is refused for a run rather than answered
// without them; one that does not ask is runnable.
func TestRunRefusesLogprobsAndEcho(t *testing.T) {
	for _, body := range []string{`"logprobs":false`, `"logprobs":null`, `"top_logprobs":0`} {
		r, err := ParseChat([]byte(chatWith(body)))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if err := r.RunSupported(); err != nil {
			t.Fatalf("%s: RunSupported = %v, want nil", body, err)
		}
	}
	r, err := ParseChat([]byte(chatWith(`"logprobs":true,"top_logprobs":20`)))
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.RunSupported(), "logprobs", "logprobs are not supported")

	for _, tc := range []struct{ member, param, msg string }{
		{`"logprobs":0`, "logprobs", "logprobs are not supported"},
		{`"echo":true`, "echo", "echo is not supported"},
	} {
		c, err := ParseCompletion([]byte(`{"model":"m","prompt":"x",` + tc.member + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.member, err)
		}
		wantErr(t, c.RunSupported(), tc.param, tc.msg)
	}
	c, err := ParseCompletion([]byte(`{"model":"m","prompt":"x","echo":false,"logprobs":null,"max_tokens":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RunSupported(); err != nil {
		t.Fatalf("RunSupported = %v, want nil", err)
	}
}

// top_logprobs takes 0 to 20, as OpenAI documents.
func TestTopLogprobsBounds(t *testing.T) {
	for _, v := range []string{"0", "20"} {
		if _, err := ParseChat([]byte(chatWith(`"logprobs":true,"top_logprobs":` + v))); err != nil {
			t.Fatalf("top_logprobs %s: %v", v, err)
		}
	}
	for _, v := range []string{"-1", "21"} {
		_, err := ParseChat([]byte(chatWith(`"logprobs":true,"top_logprobs":` + v)))
		wantErr(t, err, "top_logprobs", "between 0 and 20")
	}
}
