//go:build !race

package gateway

// raceEnabled40b: built with -race, whose instrumentation (and the
// shadow memory it allocates as the heap grows) swamps what the
// linearity tests time; they measure the code without it.
const raceEnabled40b = false
