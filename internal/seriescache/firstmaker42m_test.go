package seriescache

import (
	"sync"
	"testing"
	"time"
)

// A Get that waits for the lock while another goroutine is making the
// same key's child takes that child, and never makes (and stores) a
// second one. Whether the second Get reaches the lock before the first
// is done is up to the scheduler, so the test gives it a moment each
// round and repeats: on a slow machine a round may prove nothing, never
// fail wrongly.
func TestGetWaitingForTheLockTakesTheChildMade42m(t *testing.T) {
	for round := range 30 {
		var c Cache[int, *int]
		var mu sync.Mutex
		made := 0
		making := make(chan struct{})
		finish := make(chan struct{})
		first := make(chan *int, 1)
		// Owner: this round; ends once finish is closed.
		go func() {
			first <- c.Get(round, func(int) *int {
				mu.Lock()
				made++
				mu.Unlock()
				close(making)
				<-finish
				return new(int)
			})
		}()
		<-making
		second := make(chan *int, 1)
		// Owner: this round; ends once the first Get is done.
		go func() {
			second <- c.Get(round, func(int) *int {
				mu.Lock()
				made++
				mu.Unlock()
				return new(int)
			})
		}()
		time.Sleep(2 * time.Millisecond) // let the second Get reach the lock
		close(finish)
		a, b := <-first, <-second
		if made != 1 || a != b {
			t.Fatalf("round %d: child made %d times, the two Gets got the same: %v", round, made, a == b)
		}
		if got := c.Get(round, func(int) *int { return nil }); got != a {
			t.Fatalf("round %d: a later Get got another child", round)
		}
	}
}
