package nodewire

import (
	"context"
	"sync"
	"sync/atomic"
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

	maxIdle   int32         // maxIdleWorkers; tests shrink it
	idleAfter time.Duration // workerIdle; tests shrink it

	idle atomic.Int32 // workers waiting on work
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
		// serve's send never blocks, so a stream is handed over only in
		// the first case: a worker that leaves by another drops nothing.
		select {
		case st = <-p.work:
			p.idle.Add(-1)
			idle.Stop()
		case <-idle.C:
			p.idle.Add(-1)
			return
		case <-p.ctx.Done():
			p.idle.Add(-1)
			return
		}
	}
}

// park counts the caller as waiting, unless enough already wait.
func (p *workerPool) park() bool {
	if p.idle.Add(1) > p.maxIdle {
		p.idle.Add(-1)
		return false
	}
	return true
}
