package gateway

// Request headers the edge reads, spelt in net/http's canonical form
// (http.CanonicalHeaderKey): Header.Get canonicalizes its argument, and a
// name already canonical costs no allocation, where "X-IOP-Priority" cost
// one on every request. Documentation and error messages keep the
// spelling clients use (X-IOP-*); header names are case-insensitive.
const (
	hdrSessionID        = "X-Iop-Session-Id"
	hdrPriority         = "X-Iop-Priority"
	hdrDeadlineMs       = "X-Iop-Deadline-Ms"
	hdrRequestID        = "X-Request-Id"
	hdrAuthorization    = "Authorization"
	hdrAPIKey           = "X-Api-Key"         // Anthropic SDKs' key
	hdrAnthropicVersion = "Anthropic-Version" // sent by Anthropic SDKs
)
