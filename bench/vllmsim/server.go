package vllmsim

import (
	"errors"
	"sync"
	"time"
)

// ErrClosed is why a request still in the engine ends when the server
// closes.
var ErrClosed = errors.New("vllmsim: server closed")

// Server is a simulated vLLM OpenAI server; it is an http.Handler.
type Server struct {
	cfg     Config
	handler *routes
	created int64 // unix seconds, the "created" of responses and models

	mu     sync.Mutex // guards eng and closed
	eng    *engine
	closed bool

	wake      chan struct{} // capacity 1: work arrived while idle
	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the scheduler goroutine returns
	closeOnce sync.Once
}

// New starts a simulator with cfg (zero fields take defaults).
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:     cfg,
		created: time.Now().Unix(),
		eng:     newEngine(cfg),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	s.handler = newRoutes(s)
	// Owner: Server. Stops when Close closes s.stop.
	go s.loop()
	return s
}

// Config returns the effective configuration (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// Close stops the scheduler and waits for it. Requests still in the engine
// end: streams stop without [DONE], others get 503. Safe to call twice.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
	})
	<-s.done
}

// Stats returns the counters now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.snapshot()
}

// submit outcomes.
var (
	errQueueFull = errors.New("vllmsim: waiting queue full")
)

// submit queues a request.
func (s *Server) submit(prompt []uint32, maxTokens int) (*seq, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if len(s.eng.waiting) >= s.cfg.MaxWaiting {
		s.eng.stats.Rejected++
		return nil, errQueueFull
	}
	q := s.eng.add(prompt, maxTokens)
	s.eng.stats.Accepted++
	s.eng.stats.PromptTokens += int64(len(prompt))
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return q, nil
}

// reject counts a request refused before queueing.
func (s *Server) reject() {
	s.mu.Lock()
	s.eng.stats.Rejected++
	s.mu.Unlock()
}

// abort drops a sequence whose client went away.
func (s *Server) abort(q *seq) {
	s.mu.Lock()
	s.eng.abort(q)
	s.mu.Unlock()
}

// resyncAfter is how far the scheduler may fall behind its simulated clock
// before it stops catching up (e.g. after the process was descheduled).
const resyncAfter = 50 * time.Millisecond

// loop runs steps: plan under the lock, sleep the step's scaled cost
// without it (handlers keep queueing and aborting), apply under the lock.
// Sleeps follow an absolute clock so timer slack does not accumulate.
func (s *Server) loop() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var clock time.Time
	for {
		s.mu.Lock()
		st := s.eng.plan()
		s.mu.Unlock()
		if len(st.items) == 0 {
			select {
			case <-s.stop:
				return
			case <-s.wake:
				clock = time.Time{}
				continue
			}
		}
		now := time.Now()
		if clock.IsZero() || now.Sub(clock) > resyncAfter {
			clock = now
		}
		clock = clock.Add(time.Duration(float64(st.cost) * s.cfg.TimeScale))
		if wait := clock.Sub(now); wait > 0 {
			timer.Reset(wait)
			select {
			case <-s.stop:
				return
			case <-timer.C:
			}
		}
		select {
		case <-s.stop:
			return
		default:
		}
		s.mu.Lock()
		s.eng.apply(st)
		s.mu.Unlock()
	}
}
