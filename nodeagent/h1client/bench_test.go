package h1client

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRoundTrip sends a 1 KB POST and reads a 1 KB answer (the shape
// of a short chat completion) over loopback, kept alive, with this
// transport and with http.Transport configured as the node used it.
func BenchmarkRoundTrip(b *testing.B) {
	answer := bytes.Repeat([]byte("a"), 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	defer srv.Close()
	body := bytes.Repeat([]byte("q"), 1000)
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"h1client", New(Options{})},
		{"http.Transport", &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cl := &http.Client{Transport: bc.rt}
			defer cl.CloseIdleConnections()
			buf := make([]byte, 4096)
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := cl.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := resp.Body.Read(buf); err != nil {
						break
					}
				}
				resp.Body.Close()
			}
			// Wall time on a small VM depends on how CPUs wake; the CPU the
			// process (client and server) spent is the steadier figure.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
