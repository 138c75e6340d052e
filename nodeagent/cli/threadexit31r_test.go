//go:build linux

package cli

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testproc"
)

// A CLI's parent-death signal follows the thread that started it, and a
// goroutine that returns while locked to its thread ends that thread. A
// run keeps the thread that started its CLI until the CLI is reaped:
// threads ended meanwhile by the rest of the node (here a churn of them,
// on one P so that the run's goroutine changes threads) kill no CLI.
func TestThreadsEndingKillNoCLI(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	spec := trueSpec(t)
	spec.path, spec.argv = testproc.Shell(t), []string{"sh", "-c", "sleep 0.1"}
	// The forty runs share one P with the churn: on a loaded machine they
	// took up to 30 s together (load 13). The timeout only bounds a
	// failure, so it leaves room for far slower machines.
	spec.timeout = 5 * time.Minute
	stop := make(chan struct{})
	var churn sync.WaitGroup
	for range 2 {
		churn.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ended := make(chan struct{})
				go func() {
					runtime.LockOSThread() // never unlocked: the thread ends
					close(ended)
				}()
				<-ended
			}
		})
	}
	var runs sync.WaitGroup
	errs := make(chan error, 40)
	for range 40 {
		runs.Go(func() {
			out, err := runProcess(context.Background(), spec, failingSink{})
			// A CLI killed by a signal is an error ("cli was killed by
			// signal killed"); a success whose stdin copy outlived the
			// wait delay (one P, a loaded machine) is exit code 0.
			if err == nil && out.exitCode != 0 {
				err = fmt.Errorf("the CLI ended with exit code %d", out.exitCode)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	runs.Wait()
	close(stop)
	churn.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
