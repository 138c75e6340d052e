package config

import (
	"os"
	"strings"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// maxEnvDocBytes bounds a variable holding a list or map key's value (a
// YAML or JSON document): the config file itself is read whole, but a
// variable is no place for a document larger than any real node list.
const maxEnvDocBytes = 1 << 20

// applyEnvDocs sets each list-of-objects or map key (nodes, models,
// auth.key_priorities) whose IOP_* variable is set to the YAML (or JSON)
// document that variable holds, replacing the file's value: the contract
// lets every key come from the environment, and these have no scalar
// spelling. A document that does not parse is a problem naming the
// variable (never its value: a node list holds tokens); what it holds is
// then decoded and validated as the file's would be, by key.
func applyEnvDocs(v *viper.Viper, docKeys []string) (p problems) {
	for _, key := range docKeys {
		name := envName(key)
		val, ok := os.LookupEnv(name)
		if !ok || strings.TrimSpace(val) == "" {
			continue
		}
		if len(val) > maxEnvDocBytes {
			p.add("%s (%s): %d bytes, at most %d", name, key, len(val), maxEnvDocBytes)
			continue
		}
		var doc any
		if err := yaml.Unmarshal([]byte(val), &doc); err != nil {
			p.add("%s (%s): not a YAML or JSON document: %s", name, key, yamlErrLine(err))
			continue
		}
		v.Set(key, doc)
	}
	return p
}

// yamlErrLine is a YAML parse error without the parser's prefix and
// without any quoted part of the document (a value may be a secret).
func yamlErrLine(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if i := strings.IndexAny(msg, "`'\""); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return msg
}
