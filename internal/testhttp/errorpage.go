package testhttp

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// ErrorPage is a proxy's 502 page in front of a backend (an HTML page with
// its inline styles), about 96 KiB: longer than the 64 KiB an adapter reads
// of an error body for its message, shorter than that plus the 256 KiB it
// drains after.
var ErrorPage = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title><style>" +
	strings.Repeat("body{font-family:sans-serif;margin:0;padding:0} ", 2000) +
	"</style></head><body><h1>502 Bad Gateway</h1></body></html>\n"

// ErrorPageHandler answers 502 with ErrorPage and its length, as a proxy
// serving a static page does.
func ErrorPageHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("Content-Length", strconv.Itoa(len(ErrorPage)))
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, ErrorPage)
}

// SizedError answers status with a body of n spaces and its length.
func SizedError(status, n int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, strings.Repeat(" ", n))
	}
}
