//go:build race

package testlinear

const raceEnabled = true
