package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// revhttpDeadlineWriter is a ResponseWriter whose connection read
// deadlines are recorded instead of set, as http.ResponseController
// reaches them through SetReadDeadline.
type revhttpDeadlineWriter struct {
	http.ResponseWriter
	mu        sync.Mutex
	deadlines []time.Time // guarded by mu
}

func (w *revhttpDeadlineWriter) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadlines = append(w.deadlines, t)
	return nil
}

func (w *revhttpDeadlineWriter) last() (time.Time, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.deadlines) == 0 {
		return time.Time{}, 0
	}
	return w.deadlines[len(w.deadlines)-1], len(w.deadlines)
}

func revhttpBody(w *revhttpDeadlineWriter, body string) *deadlineBody {
	return &deadlineBody{ReadCloser: io.NopCloser(strings.NewReader(body)), rc: http.NewResponseController(w)}
}

// Reading a body to its end clears the connection's read deadline, once:
// left armed, it would pass during a long stream and net/http's background
// read would cancel the request.
func TestBodyReadToEOFClearsReadDeadline(t *testing.T) {
	w := &revhttpDeadlineWriter{ResponseWriter: httptest.NewRecorder()}
	b := revhttpBody(w, `{"model":"m"}`)
	if got, err := readAll(b, 13); err != nil || string(got) != `{"model":"m"}` {
		t.Fatalf("readAll: %q, %v", got, err)
	}
	d, n := w.last()
	if n != 1 || !d.IsZero() {
		t.Fatalf("after EOF: %d deadline calls, last %v; want one clearing call", n, d)
	}
	// A second read at EOF does not set it again.
	_, _ = b.Read(make([]byte, 1))
	if _, n := w.last(); n != 1 {
		t.Fatalf("a read past EOF set the deadline again (%d calls)", n)
	}
}

// A body read to its end is not abandoned: an error answered after it
// (an upstream failure, say) keeps the connection for the next request.
// A body still unread is abandoned: Connection: close.
func TestAbandonKeepsConnectionOfABodyReadToEOF(t *testing.T) {
	gin.SetMode(gin.TestMode)
	w := &revhttpDeadlineWriter{ResponseWriter: httptest.NewRecorder()}

	read := revhttpBody(w, "abc")
	if _, err := io.ReadAll(read); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	if read.abandon(c) {
		t.Fatal("a body read to EOF was abandoned")
	}
	if h := c.Writer.Header().Get("Connection"); h != "" {
		t.Fatalf("a body read to EOF: Connection: %q", h)
	}

	unread := revhttpBody(w, "abc")
	rec = httptest.NewRecorder()
	c, _ = gin.CreateTestContext(rec)
	if !unread.abandon(c) || c.Writer.Header().Get("Connection") != "close" {
		t.Fatalf("an unread body was not abandoned: %v", c.Writer.Header())
	}
}

// revhttpTrickle hands out its bytes then io.EOF, whatever was declared.
type revhttpTrickle struct{ n int }

func (r *revhttpTrickle) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n, 16<<10)
	clear(p[:k])
	r.n -= k
	return k, nil
}

// A client that declares a large body and sends a little costs about
// eagerBody, not the declared length: readAll allocates ahead of the
// bytes only up to eagerBody.
func TestReadAllDeclaredLargeSentLittle(t *testing.T) {
	const declared = 64 << 20
	var got int
	per := allocated(func() {
		for range 4 {
			b, err := readAll(&revhttpTrickle{n: 100}, declared)
			if err != nil {
				t.Fatal(err)
			}
			got = len(b)
		}
	}) / 4
	if got != 100 {
		t.Fatalf("read %d bytes, want 100", got)
	}
	if per > 2*eagerBody {
		t.Fatalf("100 bytes of a declared %d allocated %d bytes, want at most %d", declared, per, 2*eagerBody)
	}
}

// Growth past eagerBody stops at the declared length: a body one byte
// over eagerBody costs eagerBody plus its own length, not a doubling to
// twice eagerBody (the slack is the allocator rounding up to pages).
func TestReadAllGrowthCappedAtDeclared(t *testing.T) {
	const n = eagerBody + 1
	per := allocated(func() {
		for range 4 {
			b, err := readAll(&revhttpTrickle{n: n}, n)
			if err != nil || len(b) != n {
				t.Fatalf("read %d bytes, %v", len(b), err)
			}
		}
	}) / 4
	if want := uint64(eagerBody + n + 16<<10); per > want {
		t.Fatalf("a %d-byte body of declared length allocated %d bytes, want at most %d", n, per, want)
	}
}
