// Package adapters is the one registry of the adapter types a node can run:
// iop-node and every test stack build their agent from Factories, so adding
// an adapter is one package and one line here.
package adapters

import (
	iopconfig "github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/cli"
	"github.com/iop-gateway/iop/nodeagent/llamacpp"
	"github.com/iop-gateway/iop/nodeagent/mock"
	"github.com/iop-gateway/iop/nodeagent/ollama"
	"github.com/iop-gateway/iop/nodeagent/openaicompat"
)

// Factories returns the factory of every adapter type, by the type name
// providers use in the edge config (nodes[].providers[].type). The names the
// edge also reads (it shapes a tunnelled request by them) are config's
// constants, so the two sides cannot drift apart.
func Factories() map[string]adapter.Factory {
	return map[string]adapter.Factory{
		"openai_compat":                openaicompat.New,
		iopconfig.ProviderTypeVLLM:     openaicompat.NewVLLM,
		iopconfig.ProviderTypeOllama:   ollama.New,
		"cli":                          cli.New,
		iopconfig.ProviderTypeLlamaCpp: llamacpp.New,
		"mock":                         mock.New,
	}
}
