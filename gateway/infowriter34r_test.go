package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// gin's writer asks the writer it wraps, with no check, for Hijack and
// CloseNotify: served through Handler, that is the infoWriter, which passes
// both on to the connection (a handler that takes the connection over
// answers on it; none panics on a missing method).
func TestInfoWriterPassesHijackAndCloseNotify(t *testing.T) {
	s := probeServer(t, func(*gin.Context) {})
	s.engine.GET("/v1/hijack34r", func(c *gin.Context) {
		if c.Writer.CloseNotify() == nil {
			c.Status(http.StatusInternalServerError)
			return
		}
		conn, rw, err := c.Writer.Hijack()
		if err != nil {
			c.Status(http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		_ = rw.Flush()
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/v1/hijack34r")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "hijacked" {
		t.Fatalf("answer %d %q (%v), want 200 \"hijacked\" written on the hijacked connection", resp.StatusCode, body, err)
	}
}
