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

// maxServeHandlers bounds the streams Serve serves at once: a stream the
// edge opens while that many handlers run is reset at once, without a
// goroutine. The session bounds the streams the edge has open
// (muxMaxPeerStreams), but a handler may outlive its stream's place there
// (the edge reset it while the handler works); this bounds the
// goroutines. A variable only for tests, which shrink it; a pool reads it
// once.
var maxServeHandlers = 1 << 16

// workerPool hands streams to waiting goroutines, starting one when none
// waits. It belongs to one Serve call.
type workerPool struct {
	ctx  context.Context // Serve's; cancelled before wg is waited on
	wg   *sync.WaitGroup // Serve's handler count
	run  func(*Stream)   // serves one stream
	work chan *Stream    // unbuffered: a send succeeds only into a waiting worker

	maxIdle   int32         // maxIdleWorkers; tests shrink it
	idleAfter time.Duration // workerIdle; tests shrink it
	maxBusy   int32         // maxServeHandlers

	idle atomic.Int32 // workers waiting on work
	busy atomic.Int32 // streams being served (run has not returned)
}

func newWorkerPool(ctx context.Context, wg *sync.WaitGroup, run func(*Stream)) *workerPool {
	return &workerPool{ctx: ctx, wg: wg, run: run, work: make(chan *Stream), maxIdle: maxIdleWorkers, idleAfter: workerIdle, maxBusy: int32(maxServeHandlers)}
}

// serve runs st on a waiting worker, or on a new one; with maxBusy
// streams already being served it resets st instead.
func (p *workerPool) serve(st *Stream) {
	if p.busy.Add(1) > p.maxBusy {
		p.busy.Add(-1)
		st.s.Reset()
		return
	}
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
		p.busy.Add(-1)
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
