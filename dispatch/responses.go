package dispatch

import "time"

// Bounds of the edge's memory of which provider answered which Responses
// API response (RememberResponse). It is this edge's own: edges behind a
// balancer share none of it, so a follow-up that reaches another edge is
// routed as usual.
const (
	// MaxRememberedResponses is how many response ids are remembered at
	// most; past it the oldest is forgotten first.
	MaxRememberedResponses = 10000
	// RememberedResponseTTL is how long a response id is remembered.
	RememberedResponseTTL = time.Hour
	// MaxResponseIDBytes is the longest response id remembered (vLLM's
	// are 37 bytes, "resp_" and 32 hex digits; OpenAI's about 50): a
	// longer one is not, so an entry costs a bounded few hundred bytes.
	MaxResponseIDBytes = 128
)

// RememberResponse records that the provider l is on answered the
// Responses API response id, so that a follow-up naming it
// (Request.PreviousResponseID) is sent there. An empty id, or one longer
// than MaxResponseIDBytes, is not remembered. Only ids an upstream
// answered are recorded, never one a client sent: a client cannot point
// another's follow-ups anywhere, and the memory stays bounded by
// MaxRememberedResponses whatever clients send.
//
// An id remembered for another provider keeps it (until its TTL): ids are
// unique, so a second provider answering one is broken or hostile, e.g. an
// upstream echoing the previous_response_id of a follow-up that reached
// it, which would otherwise take the conversation's later follow-ups from
// the provider that holds it.
func (d *Dispatcher) RememberResponse(id string, l *Lease) {
	if id == "" || len(id) > MaxResponseIDBytes || l == nil || l.res == nil {
		return
	}
	d.mu.Lock()
	if key, ok := d.responses.get(id); !ok || key == l.res.key {
		d.responses.put(id, l.res.key)
	}
	d.mu.Unlock()
}
