package gateway

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the status page asset
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/dispatch"
)

// statusPageHTML is the self-contained admin status page: no external
// assets, so it works offline and behind any firewall. It polls
// /admin/status and /admin/events with the admin token it keeps in
// sessionStorage (taken from a #token=… fragment or its input box; the
// fragment is never sent to the server and is wiped from the address bar).
//
//go:embed statuspage.html
var statusPageHTML []byte

// statusPageCSP allows exactly the page's own inline <style> and <script>
// (by hash) and same-origin fetches; nothing else loads.
var statusPageCSP = "default-src 'none'; " +
	"script-src " + inlineHashes(statusPageHTML, "script") + "; " +
	"style-src " + inlineHashes(statusPageHTML, "style") + "; " +
	"connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHashes returns the CSP source list ('sha256-…' …) of every inline
// <tag>…</tag> block of page.
func inlineHashes(page []byte, tag string) string {
	open, end := []byte("<"+tag+">"), []byte("</"+tag+">")
	var srcs []string
	for rest := page; ; {
		i := bytes.Index(rest, open)
		if i < 0 {
			break
		}
		rest = rest[i+len(open):]
		j := bytes.Index(rest, end)
		if j < 0 {
			break
		}
		sum := sha256.Sum256(rest[:j])
		srcs = append(srcs, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		rest = rest[j+len(end):]
	}
	if len(srcs) == 0 {
		return "'none'"
	}
	return strings.Join(srcs, " ")
}

// registerStatusPage serves the status page and its event feed:
//
//	GET, HEAD /admin   the HTML page; public, so it can load and ask for
//	                   the token (it holds no data of its own)
//	GET, HEAD /admin/events
//	                   dispatcher.RecentEvents() as JSON; admin token
//
// It is registered on the engine rather than the /admin group because the
// group's auth middleware would also guard the page.
func (s *Server) registerStatusPage(e *gin.Engine) {
	e.GET("/admin", s.adminPage)
	e.HEAD("/admin", s.adminPage)
	e.GET("/admin/events", s.adminAuth, s.adminEvents)
	e.HEAD("/admin/events", s.adminAuth, s.adminEvents)
}

// adminPage writes the status page.
func (s *Server) adminPage(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", statusPageCSP)
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	c.Data(http.StatusOK, "text/html; charset=utf-8", statusPageHTML)
}

// EventsResponse is the GET /admin/events document: the dispatcher's recent
// node lifecycle events, oldest first (at most 100).
type EventsResponse struct {
	Events []dispatch.Event `json:"events"`
}

// adminEvents writes the recent node lifecycle events.
func (s *Server) adminEvents(c *gin.Context) {
	ev := s.d.RecentEvents()
	if ev == nil {
		ev = []dispatch.Event{}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, EventsResponse{Events: ev})
}
