package h1client

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Informational answers before the final one are bounded as net/http's
// Transport bounds them: by the response header bound, which they count
// against with the final head, and not by their number. An upstream (or a
// proxy before it) that sends a 102 or 103 now and then while it works gets
// its answer through, whatever the transport; one that sends them without
// end fails at the bound.
func TestManyInformationalResponsesWithinHeaderBound(t *testing.T) {
	const hints = 12
	u, _ := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		if n <= 2 {
			io.WriteString(c, strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", hints/2)+
				strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n", hints/2)+
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return
		}
		hint := "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
		for {
			if _, err := io.WriteString(c, hint); err != nil {
				return
			}
		}
	})
	ref := &http.Transport{MaxResponseHeaderBytes: 8 << 10}
	defer ref.CloseIdleConnections()
	tr := New(Options{MaxResponseHeaderBytes: 8 << 10})
	defer tr.Close()
	for _, rt := range []http.RoundTripper{ref, tr} {
		if got := post(t, &http.Client{Transport: rt}, u, "{}"); got != "200 ok" {
			t.Fatalf("%T: %d informational answers, then 200: got %s", rt, hints, got)
		}
	}
	// On a connection of its own: the one kept may not show its close yet.
	tr.CloseIdleConnections()
	_, err := (&http.Client{Transport: tr}).Post(u, "application/json", strings.NewReader("{}"))
	if !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("endless 103s: %v, want ErrHeaderTooLarge", err)
	}
}
