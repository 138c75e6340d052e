package nodewire

import (
	"context"
	"sync"
	"time"
)

// Stream handlers run on reused goroutines. A new goroutine starts with a
// small stack and grows it, by copying, as the handler goes deep (HTTP
// client, codecs): on the node that copying was about a sixth of the CPU of
// a tunnelled request. A goroutine that finished a stream waits a while for
// the next one instead, keeping its stack.
const (
	// maxIdleWorkers bounds the goroutines kept waiting for a stream: after
	// a burst, more than this exit at once, so idle stacks cost at most
	// this many times a grown stack (tens of KiB each).
	maxIdleWorkers = 256
	// workerIdle is how long a waiting goroutine lives without a stream.
	workerIdle = 20 * time.Second
)

// workerPool hands streams to waiting goroutines, starting one when none
// waits. It belongs to one Serve call.
type workerPool struct {
	ctx  context.Context // Serve's; cancelled before wg is waited on
	wg   *sync.WaitGroup // Serve's handler count
	run  func(*Stream)   // serves one stream
	work chan *Stream    // unbuffered: a send succeeds only into a waiting worker

	maxIdle   int           // maxIdleWorkers; tests shrink it
	idleAfter time.Duration // workerIdle; tests shrink it

	mu   sync.Mutex
	idle int // workers waiting on work; guarded by mu
}

func newWorkerPool(ctx context.Context, wg *sync.WaitGroup, run func(*Stream)) *workerPool {
	return &workerPool{ctx: ctx, wg: wg, run: run, work: make(chan *Stream), maxIdle: maxIdleWorkers, idleAfter: workerIdle}
}

// serve runs st on a waiting worker, or on a new one.
func (p *workerPool) serve(st *Stream) {
	select {
	case p.work <- st:
		return
	default:
	}
	p.wg.Add(1)
	// Owner: Serve (waits on wg after cancelling ctx). Stops when ctx is
	// cancelled while it waits, after workerIdle without a stream, or when
	// maxIdle others already wait; a running handler watches ctx.
	go p.worker(st)
}

func (p *workerPool) worker(st *Stream) {
	defer p.wg.Done()
	var idle *time.Timer
	for {
		p.run(st)
		if !p.park() {
			return
		}
		if idle == nil {
			idle = time.NewTimer(p.idleAfter)
		} else {
			idle.Reset(p.idleAfter)
		}
		select {
		case st = <-p.work:
			p.unpark()
			idle.Stop()
		case <-idle.C:
			p.unpark()
			// A stream may have been handed over between the timer
			// firing and unpark; it is served, not dropped.
			select {
			case st = <-p.work:
				continue
			default:
				return
			}
		case <-p.ctx.Done():
			p.unpark()
			return
		}
	}
}

// park counts the caller as waiting, unless enough already wait.
func (p *workerPool) park() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle >= p.maxIdle {
		return false
	}
	p.idle++
	return true
}

func (p *workerPool) unpark() {
	p.mu.Lock()
	p.idle--
	p.mu.Unlock()
}
