package cli

import (
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// errSessionsInUse is the cause of a new session refused because the
// instance holds max_sessions sessions and a run holds or waits for each.
var errSessionsInUse = errors.New("every session is in use")

// Sessions are bounded by max_sessions. The instance counts its live
// sessions (in the map and not terminated) and keeps those that no run
// holds or waits for (users == 0) in a ring ordered by use, so that a new
// session at the bound evicts the least recently used of them in O(1). A
// session with users is never evicted: a run counts itself under mu in the
// same critical section in which it finds the session, before it waits for
// the session's slot, so there is no moment at which a run is about to
// take a session that eviction could pick.

// idlePushLocked makes s the most recently used idle session.
func (a *instance) idlePushLocked(s *session) {
	s.prev, s.next = &a.idle, a.idle.next
	a.idle.next.prev = s
	a.idle.next = s
}

// idleRemoveLocked takes s out of the idle ring, if it is in it.
func (a *instance) idleRemoveLocked(s *session) {
	if s.next == nil {
		return
	}
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
}

// retireLocked marks the live session s terminated: no run starts on it
// any more, and it no longer counts against the bound. The caller removes
// its state and then the session (finishRemoval).
func (a *instance) retireLocked(s *session) {
	s.terminated = true
	a.idleRemoveLocked(s)
	a.live--
}

// useLocked finds or creates session id for a run and counts the run as
// its user. A terminated session is returned uncounted: the caller waits
// for it to be gone. Sessions evicted to make room are returned in
// evicted; the caller removes them (removeEvicted) without holding mu.
func (a *instance) useLocked(id string) (s *session, evicted []*session, err error) {
	s = a.sessions[id]
	if s == nil {
		if evicted, err = a.makeRoomLocked(); err != nil {
			return nil, evicted, err
		}
		s = a.newSession(id)
		a.sessions[id] = s
		a.live++
	}
	if s.terminated {
		return s, evicted, nil
	}
	if s.users == 0 {
		a.idleRemoveLocked(s)
	}
	s.users++
	return s, evicted, nil
}

// makeRoomLocked evicts least recently used idle sessions until a new one
// fits under max_sessions (several after a Reconfigure lowered it). Each
// session is evicted at most once, so this is amortised O(1) per new
// session.
func (a *instance) makeRoomLocked() ([]*session, error) {
	limit := a.cfg.maxSessions
	var evicted []*session
	for a.live >= limit {
		victim := a.idle.prev
		if victim == &a.idle {
			return evicted, &adapter.Error{
				Code:    adapter.CodeCapacityExceeded,
				Message: fmt.Sprintf("cli sessions are all in use (%d); retry later", limit),
				Err:     errSessionsInUse,
			}
		}
		a.retireLocked(victim)
		evicted = append(evicted, victim)
	}
	return evicted, nil
}

// done ends one user's use of s (after it gave back the slot, if it had
// it). The last user's going makes s the most recently used idle session,
// or drops it if it has no state: its runs never started the CLI (which
// failed to start, say), and keeping it would only take the place of a
// session worth continuing.
func (a *instance) done(s *session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s.users--
	switch {
	case s.users > 0 || s.terminated:
	case s.persisted:
		a.idlePushLocked(s)
	default:
		delete(a.sessions, s.id)
		a.live--
	}
}

// removeEvicted removes the state of sessions retired by makeRoomLocked,
// as TerminateSession does: runs of their ids wait until the removal is
// done and then start afresh. Nothing holds an evicted session's slot (it
// had no users), so taking it does not wait.
func (a *instance) removeEvicted(evicted []*session) {
	for _, s := range evicted {
		s.sem <- struct{}{}
		err := os.RemoveAll(s.dir)
		a.finishRemoval(s)
		if err != nil {
			// The directory stays behind; a later start counts it and
			// trims it if it is over the bound.
			a.log.Warn("cli: remove evicted session state", zap.String("session_id", s.id), zap.Error(err))
		}
	}
	if len(evicted) > 0 {
		a.log.Debug("cli: evicted least recently used sessions", zap.Int("count", len(evicted)))
	}
}

// finishRemoval drops the terminated session s, whose slot the caller
// holds, once its state is removed, and lets waiting runs start afresh.
func (a *instance) finishRemoval(s *session) {
	a.mu.Lock()
	delete(a.sessions, s.id)
	a.mu.Unlock()
	close(s.gone)
	<-s.sem
}
