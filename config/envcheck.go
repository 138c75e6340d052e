package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
)

// envPrefix starts every variable that overrides a config key.
const envPrefix = "IOP_"

// otherIOPVariables share the prefix but are read by something other than
// the config: the image's HEALTHCHECK (Dockerfile).
var otherIOPVariables = map[string]bool{"IOP_HEALTHCHECK_URL": true}

// envName is the variable that overrides key (viper: prefix, upper case,
// '.' as '_').
func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// unmatchedEnv lists, sorted, the IOP_* variables of environ that override
// no key of the config (known: the variables bindEnvs bound) and that no
// *_env key of the decoded config names (a token_env: IOP_NODE_A_TOKEN).
// A typo (IOP_LISTEN_HTTPS) would otherwise leave the key's default in
// place with no sign. Names only: a value may be a secret.
func unmatchedEnv(environ []string, known map[string]bool, decoded any) []string {
	var named map[string]bool
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || known[name] || otherIOPVariables[name] {
			continue
		}
		if named == nil {
			named = map[string]bool{}
			envKeyValues(reflect.ValueOf(decoded), named)
		}
		if !named[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// envKeyValues adds to named the values of every *_env string key in v
// (nodes[].token_env, cluster.redis.password_env, providers' api_key_env).
func envKeyValues(v reflect.Value, named map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			envKeyValues(v.Elem(), named)
		}
	case reflect.Slice:
		for i := range v.Len() {
			envKeyValues(v.Index(i), named)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := strings.Split(f.Tag.Get("mapstructure"), ",")[0]
			if f.Type.Kind() == reflect.String && strings.HasSuffix(tag, "_env") {
				if s := v.Field(i).String(); s != "" {
					named[s] = true
				}
				continue
			}
			envKeyValues(v.Field(i), named)
		}
	}
}

// environ is os.Environ, replaced in tests.
var environ = os.Environ

func (c *Edge) setUnmatchedEnv(names []string) { c.Log.unmatchedEnv = names }
func (c *Node) setUnmatchedEnv(names []string) { c.Log.unmatchedEnv = names }

// UnmatchedEnv are the IOP_* variables set at load that override no key
// of the config (unmatchedEnv); nil for a config not loaded from a file.
func (c *Edge) UnmatchedEnv() []string { return c.Log.unmatchedEnv }

// UnmatchedEnv is Edge.UnmatchedEnv for the node's config.
func (c *Node) UnmatchedEnv() []string { return c.Log.unmatchedEnv }
