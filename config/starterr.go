package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/viper"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"
)

// SyntaxError is a config file that is not YAML: File is its path, Err
// the parser's error (viper.ConfigParseError around the yaml one). Its
// message is "config: FILE: line N: what" — the parser's own words
// without viper's capitalised "While parsing config: yaml: " heading,
// which named neither the file nor the step. A few parser errors carry
// no line (a control character, invalid UTF-8); they read
// "config: FILE: what".
type SyntaxError struct {
	File string
	Err  error
}

func (e *SyntaxError) Error() string {
	return "config: " + e.File + ": " + yamlWords(e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// yamlWords is the yaml error inside err as an operator reads it: each
// unmarshal error ("line N: cannot unmarshal …") of a *yaml.TypeError, or
// the parser's "line N: what" (go-yaml spells its syntax errors
// "yaml: " + "line N: " + what, with no type of their own; the heading is
// dropped, the rest kept as the parser wrote it).
func yamlWords(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		words := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			words[i] = withoutQuotedValues(e)
		}
		return strings.Join(words, "; ")
	}
	inner := err
	var pe viper.ConfigParseError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		inner = pe.Unwrap()
	}
	return strings.TrimPrefix(inner.Error(), "yaml: ")
}

// withoutQuotedValues drops the values go-yaml quotes into an unmarshal
// error ("cannot unmarshal !!str `hunter2...` into …": the first bytes of
// the value between backquotes): a file whose top level is a bare string
// may be a secret pasted into the wrong place, and the error goes to logs.
// What is left names the line, the YAML type and the Go type.
func withoutQuotedValues(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i+1:], '`')
		if j < 0 {
			break
		}
		b.WriteString(strings.TrimRight(s[:i], " "))
		s = s[i+1+j+1:]
	}
	b.WriteString(s)
	return b.String()
}

// StartError is a start-up failure owed to the value of config keys: a
// TLS file that does not load, a listen address taken, a directory that
// cannot be created. Keys are the keys' full paths ("listen.tls.cert_file");
// Files, when set, the paths those keys name, in the same order (never a
// file's content); Fix says what to do about it. Both binaries log it as
// one line with these as fields (StartFields) and exit 1.
type StartError struct {
	Keys  []string
	Files []string
	Fix   string
	Err   error
}

func (e *StartError) Error() string {
	var b strings.Builder
	for i, k := range e.Keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		if i < len(e.Files) && e.Files[i] != "" {
			b.WriteString(" " + strconv.Quote(e.Files[i]))
		}
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *StartError) Unwrap() error { return e.Err }

// StartFields are the log fields of a start-up failure: the error, and
// when a *StartError is in its chain, the keys, files and fix apart, so a
// log search finds every start that failed on a key. file is the config
// file's path ("" to leave it out).
func StartFields(file string, err error) []zap.Field {
	fields := []zap.Field{zap.Error(err)}
	if file != "" {
		fields = append(fields, zap.String("config", file))
	}
	var se *StartError
	if errors.As(err, &se) {
		fields = append(fields, zap.Strings("keys", se.Keys))
		if len(se.Files) > 0 {
			fields = append(fields, zap.Strings("files", se.Files))
		}
		if se.Fix != "" {
			fields = append(fields, zap.String("fix", se.Fix))
		}
	}
	return fields
}

// FileKeysError names the config keys of the TLS files that did not load
// at start: fields are the keys' last parts ("cert_file", "ca_file"), as
// nodewire.TLSFileError reports them, prefix their parent ("listen.tls").
func FileKeysError(prefix string, fields, files []string, err error) *StartError {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = prefix + "." + f
	}
	return &StartError{Keys: keys, Files: files, Err: err,
		Fix: "point each key at a readable PEM file; --check-config FILE names every such problem"}
}

// TracingError names tracing.endpoint for an exporter that could not be
// set up at start. The endpoint itself is not quoted: a URL's user info
// is a credential.
func TracingError(err error) *StartError {
	return &StartError{Keys: []string{"tracing.endpoint"}, Err: err,
		Fix: "set tracing.endpoint to the collector's host:port, or tracing.enabled: false"}
}
