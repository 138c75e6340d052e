package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
)

// progress is nudged by each step of a long exchange (a frame the node
// sent, a read of the answer), so that a wait on it fails only when
// nothing moved for stallLimit, however long the whole exchange takes on
// a loaded machine.
type progress chan struct{}

func newProgress() progress { return make(progress, 1) }

// step records one step; it never blocks (a nudge already pending is
// as good as two).
func (p progress) step() {
	select {
	case p <- struct{}{}:
	default:
	}
}

var errStalled = errors.New("no progress")

// progressReader nudges p on every read of r.
type progressReader struct {
	r io.Reader
	p progress
}

func (pr progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.p.step()
	return n, err
}

// postProgressing posts body to e and reads the whole answer with no
// fixed deadline: it fails only when p (the node's frames, nudged by the
// test's node) and the answer's reads stood still for stallLimit.
func postProgressing(t *testing.T, e *stack.Edge, path, body string, p progress) response {
	t.Helper()
	c := httpClient(t)
	c.Timeout = 0
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	type result struct {
		r   response
		err error
	}
	done := make(chan result, 1)
	go func() { // Owner: this call; ends with the request, which cancel ends.
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+path, strings.NewReader(body))
		if err != nil {
			done <- result{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(progressReader{r: resp.Body, p: p})
		done <- result{r: response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err: err}
	}()
	idle := time.NewTimer(stallLimit)
	defer idle.Stop()
	for {
		select {
		case res := <-done:
			if res.err != nil {
				t.Fatalf("POST %s: %v", path, res.err)
			}
			return res.r
		case <-p:
			idle.Reset(stallLimit)
		case <-idle.C:
			cancel(errStalled)
			<-done
			t.Fatalf("POST %s: %v for %s", path, context.Cause(ctx), stallLimit)
		}
	}
}
