package dispatch

// config.MaxModelNameBytes raised (say to 4096) is not told apart: unlike
// a node id or provider name, a model name reaches no key that is read
// back under a bound (it names wait sets and metric labels only), so its
// value is a choice (the longest hub-style names, with room), not a limit
// anything else depends on; config's tests hold it at its edges.

import (
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch/cluster"
)

// The name bounds keep a resource's ledger key, the value every shared
// Responses owner holds, readable back whole: the longest node id and
// provider name config accepts, every byte escaped (a '%' grows to three),
// the ":long" tail's spelling too, still fit in the bytes ResponseOwner
// reads, and so does the lease key under the longest key prefix. A
// longer key would make every follow-up of that provider's responses
// unroutable on the other edges.
func TestLongestNamesFitTheOwnerValue39m(t *testing.T) {
	node := strings.Repeat("%", config.MaxNodeIDBytes)
	for _, provider := range []string{
		strings.Repeat("%", config.MaxProviderNameBytes),
		strings.Repeat("%", config.MaxProviderNameBytes-len(":long")) + ":long",
	} {
		key := cluster.Key(node, provider)
		if len(key) > cluster.MaxResponseOwnerBytes {
			t.Errorf("owner value of %d bytes, more than %d", len(key), cluster.MaxResponseOwnerBytes)
		}
		prefixed := strings.Repeat("p", config.MaxRedisKeyPrefix) + strings.TrimPrefix(key, cluster.DefaultKeyPrefix)
		if len(prefixed) > cluster.MaxResponseOwnerBytes {
			t.Errorf("lease key of %d bytes under the longest prefix", len(prefixed))
		}
	}
}
