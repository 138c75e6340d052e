// Package testproc drives the commands under test as processes. HoldStart
// takes one into the middle of its start-up: one of the files it reads as
// it starts is a FIFO the test holds, so the test knows when the command
// is there and chooses when it goes on. DiesWithParent checks that a
// command dies with the test process that started it, even one killed
// before it could run its cleanups.
package testproc
