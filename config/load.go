// Package config holds the documented configuration of iop-edge and iop-node:
// loading (YAML file + IOP_* environment overrides), defaults and
// validation. Validation reports every problem at once.
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// ProblemsError lists every problem found in a config.
type ProblemsError struct {
	File     string
	Problems []string
	// UnmatchedEnv are the IOP_* variables set that override no key: not
	// problems (a variable of another tool may share the prefix), but a
	// typo among them may be why a key has the value reported.
	UnmatchedEnv []string
}

func (e *ProblemsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s: %d problem(s):", e.File, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p)
	}
	return b.String()
}

// problems collects validation findings.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) err(file string) error {
	if len(p) == 0 {
		return nil
	}
	return &ProblemsError{File: file, Problems: p}
}

// load reads file into out with IOP_* environment overrides: the variable
// for key a.b_c is IOP_A_B_C. Scalar keys (and lists of scalars, comma
// separated) outside lists of objects take the variable's value; a list of
// objects or a map outside a list (nodes, models) takes a YAML or JSON
// document (applyEnvDocs). unmatched are the IOP_* variables set that
// override nothing (unmatchedEnv), also when decoding failed.
func load(file string, out any) (unmatched []string, err error) {
	v := viper.New()
	v.SetConfigFile(file)
	v.SetConfigType("yaml")
	v.SetEnvPrefix("IOP")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	if err := v.ReadInConfig(); err != nil {
		var nf viper.ConfigFileNotFoundError
		if errors.As(err, &nf) || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("config %s: not found: %w", file, err)
		}
		var pe viper.ConfigParseError
		if errors.As(err, &pe) {
			return nil, &SyntaxError{File: file, Err: err}
		}
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	known := map[string]bool{}
	docKeys := bindEnvs(v, "", reflect.TypeOf(out).Elem(), known, nil)
	envProblems := applyEnvDocs(v, docKeys)
	dec := func(c *mapstructure.DecoderConfig) {
		c.ErrorUnused = true
		// Not weakly typed: strictScalars converts what may be converted
		// (IOP_* variables are strings) and refuses the rest, by key.
		c.WeaklyTypedInput = false
		c.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToSliceHookFunc(","),
			strictScalars,
		)
	}
	err = v.Unmarshal(out, dec)
	unmatched = unmatchedEnv(environ(), known, out)
	if err != nil || len(envProblems) > 0 {
		// Every key that could not be decoded, one problem each; the keys
		// that could are decoded, and validated by the caller too.
		all := envProblems
		if err != nil {
			all = append(all, decodeProblems(err, reflect.TypeOf(out).Elem().String())...)
		}
		return unmatched, &ProblemsError{File: file, Problems: all}
	}
	return unmatched, nil
}

// decodeProblems flattens a decode error (mapstructure joins one error per
// key under a "decoding failed" heading) into one problem per key. root is
// the Go type decoded into, which mapstructure names where the file's top
// level is meant ('config.Edge' has invalid keys: ...).
func decodeProblems(err error, root string) []string {
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		var de *mapstructure.DecodeError
		if errors.As(err, &de) && de.Name() == root {
			return []string{"top level " + de.Unwrap().Error()}
		}
		return []string{err.Error()}
	}
	var out []string
	for _, e := range joined.Unwrap() {
		out = append(out, decodeProblems(e, root)...)
	}
	return out
}

// bindEnvs registers every scalar key of t with viper so IOP_* variables
// override it even when the file omits the key, and adds their variables'
// names to known. It returns docKeys with the keys of lists of objects
// and maps appended (their variables, known too, hold documents:
// applyEnvDocs); keys inside a list have no variable.
func bindEnvs(v *viper.Viper, prefix string, t reflect.Type, known map[string]bool, docKeys []string) []string {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("mapstructure"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			docKeys = bindEnvs(v, key, ft, known, docKeys)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct, ft.Kind() == reflect.Map:
			docKeys = append(docKeys, key)
			known[envName(key)] = true
		default:
			_ = v.BindEnv(key)
			known[envName(key)] = true
		}
	}
	return docKeys
}

// resolveSecret returns the inline value, or the named environment
// variable's value when env is set. Problems name the key, never the value.
func resolveSecret(p *problems, key, inline, env string) string {
	if env != "" {
		if inline != "" {
			p.add("%s and %s_env are both set; use one", key, key)
		}
		val, ok := os.LookupEnv(env)
		if !ok || val == "" {
			p.add("%s_env names %s, which is unset or empty", key, env)
		}
		return val
	}
	return inline
}

// loadNormalized loads file into a new T and runs its Normalize step; a
// *ProblemsError names the file. The IOP_* variables that override no key
// go with the config (its logger warns of them when built) or with the
// problems.
func loadNormalized[T any, PT interface {
	*T
	Normalize() error
	setUnmatchedEnv([]string)
}](file string) (*T, error) {
	cfg := PT(new(T))
	var decoded *ProblemsError
	unmatched, err := load(file, cfg)
	if err != nil && !errors.As(err, &decoded) {
		return nil, err // unreadable: nothing to validate
	}
	cfg.setUnmatchedEnv(unmatched)
	err = cfg.Normalize()
	if err == nil && decoded == nil {
		return (*T)(cfg), nil
	}
	var pe *ProblemsError
	if err != nil && !errors.As(err, &pe) {
		return nil, err
	}
	// Type errors and validation problems are reported together.
	all := &ProblemsError{File: file, UnmatchedEnv: unmatched}
	if decoded != nil {
		all.Problems = append(all.Problems, decoded.Problems...)
	}
	if pe != nil {
		all.Problems = append(all.Problems, pe.Problems...)
	}
	return nil, all
}
