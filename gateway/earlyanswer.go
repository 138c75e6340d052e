package gateway

// earlyAnswerer is a response writer that may answer the client whole
// before the upstream's body has ended: a Messages stream whose first event
// was the upstream's error document is answered with that error's status
// at once (messagesWriter.event). Nothing more of the body reaches the
// client then, so the relay stops reading it: the exchange is abandoned
// (cancelled, its lease back within the node's cancel grace) instead of
// holding the lease until the upstream ends its stream, which a broken
// upstream may never do when the stream idle timeout is 0.
type earlyAnswerer interface{ answeredEarly() bool }

// answeredEarly reports that a stream's converted events answered the
// client directly (sw is set only once the relay writes a stream's body;
// a validation error or count_tokens answered directly never reach it).
func (w *messagesWriter) answeredEarly() bool { return w.direct && w.sw != nil }

// answeredEarly reports whether w answered the client whole already.
func answeredEarly(w any) bool {
	a, ok := w.(earlyAnswerer)
	return ok && a.answeredEarly()
}
