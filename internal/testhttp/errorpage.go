package testhttp

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// errorPage is a proxy's 502 page in front of a backend (an HTML page with
// its inline styles), about 96 KiB: longer than the 64 KiB an adapter reads
// of an error body for its message, shorter than that plus the 256 KiB it
// drains after.
var errorPage = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title><style>" +
	strings.Repeat("body{font-family:sans-serif;margin:0;padding:0} ", 2000) +
	"</style></head><body><h1>502 Bad Gateway</h1></body></html>\n"

// errorPageHandler answers 502 with errorPage and its length, as a proxy
// serving a static page does.
func errorPageHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("Content-Length", strconv.Itoa(len(errorPage)))
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, errorPage)
}

// sizedError answers status with a body of n spaces and its length.
func sizedError(status, n int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, strings.Repeat(" ", n))
	}
}

// DrainCase is an error answer an adapter's drain test sends first, and
// how many connections the two requests (that answer, then a good one)
// should take.
type DrainCase struct {
	Name  string
	Page  http.HandlerFunc
	Conns int32
}

// DrainCases are the error answers that test an adapter reading maxRead
// bytes of an error body and draining maxDrain more: errorPage with its
// length, chunked (the adapter's own long error, in its server's shape),
// and spaces exactly at the bound (the connection kept) and one byte past
// it (lost). It fails t unless errorPage lies past maxRead and within the
// drain.
func DrainCases(t testing.TB, maxRead, maxDrain int, chunked http.HandlerFunc) []DrainCase {
	t.Helper()
	if n := len(errorPage); n <= maxRead || n > maxRead+maxDrain {
		t.Fatalf("page of %d bytes, want it past %d and within the drain", n, maxRead)
	}
	return []DrainCase{
		{"length", errorPageHandler, 1},
		{"chunked", chunked, 1},
		{"at the bound", sizedError(http.StatusBadGateway, maxRead+maxDrain), 1},
		{"past the bound", sizedError(http.StatusBadGateway, maxRead+maxDrain+1), 2},
	}
}
