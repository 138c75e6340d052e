//go:build race

package nodewire

// raceEnabled: built with -race, whose scheduler shuffles run order.
const raceEnabled = true
