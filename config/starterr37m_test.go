package config

import (
	"errors"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
)

// A start error reads "KEY "FILE", KEY "FILE": cause" (a key without a
// file is named alone), keeps its cause for errors.Is, and logs as the
// error, the config file, the keys' full names, their files and the fix,
// each a field of its own; the config field is left out when the file is
// not known.
func TestStartErrorTextAndFields37m(t *testing.T) {
	cause := os.ErrNotExist
	se := FileKeysError("listen.tls", []string{"cert_file", "key_file"}, []string{"/etc/c.pem", ""}, cause)
	if got, want := se.Error(), `listen.tls.cert_file "/etc/c.pem", listen.tls.key_file: file does not exist`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(se, os.ErrNotExist) {
		t.Error("the cause is not in the chain")
	}
	fields := map[string]zapcore.Field{}
	for _, f := range StartFields("edge.yaml", se) {
		fields[f.Key] = f
	}
	if f, ok := fields["config"]; !ok || f.String != "edge.yaml" {
		t.Errorf("config field %+v, want edge.yaml", f)
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	for key, want := range map[string]string{"keys": "listen.tls.cert_file listen.tls.key_file", "files": "/etc/c.pem "} {
		if got := joinArray(enc.Fields[key]); got != want {
			t.Errorf("%s field %q, want %q", key, got, want)
		}
	}
	if f := fields["fix"]; !strings.Contains(f.String, "--check-config") {
		t.Errorf("fix %q", f.String)
	}
	for _, f := range StartFields("", TracingError(errors.New("bad endpoint"))) {
		if f.Key == "config" || f.Key == "files" {
			t.Errorf("a %s field for an error without one: %+v", f.Key, f)
		}
	}
}

// joinArray is an encoded string array field's elements, space-separated.
func joinArray(v any) string {
	arr, _ := v.([]any)
	parts := make([]string, len(arr))
	for i, x := range arr {
		parts[i], _ = x.(string)
	}
	return strings.Join(parts, " ")
}
