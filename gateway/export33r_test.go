package gateway

// SSEHeaderValues33 returns the shared values of the event streams' fixed
// headers, for the external tests to check that no path wrote into them.
func SSEHeaderValues33() [][]string {
	return [][]string{sseTypeValues, noCacheValues, noBufferingValues}
}
