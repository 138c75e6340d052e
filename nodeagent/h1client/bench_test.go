package h1client

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

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
			cpu0, cpuKnown := processCPU()
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
			reportCPU(b, cpu0, cpuKnown)
		})
	}
}

// BenchmarkStreamEvent relays one SSE event of a stream (~300 bytes, a
// chat-completion chunk) from a raw upstream over loopback, each event
// sent only once the one before has been taken: the events arrive one at
// a time, as paced tokens do. "Read" reads the body as net/http frames it
// (a read that finds the socket empty before each park), "WriteTo" pushes
// it. The upstream is a goroutine on a raw socket, the same in both.
func BenchmarkStreamEvent(b *testing.B) {
	event := []byte("data: " + string(bytes.Repeat([]byte("x"), 290)) + "\n\n")
	frame := []byte(fmt.Sprintf("%x\r\n%s\r\n", len(event), event))
	for _, mode := range []string{"Read", "WriteTo"} {
		b.Run("via="+mode, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			send := make(chan struct{})
			served := make(chan struct{})
			// Owner: this benchmark; stops when send closes (the stream's
			// end) or the connection fails.
			go func() {
				defer close(served)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if _, err := readRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
				for range send {
					if _, err := c.Write(frame); err != nil {
						return
					}
				}
				io.WriteString(c, "0\r\n\r\n")
			}()
			tr := New(Options{})
			defer tr.Close()
			req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions", bytes.NewReader([]byte("{}")))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			recv := make(chan struct{}, 1)
			got := 0
			w := writeFunc(func(p []byte) error {
				for got += len(p); got >= len(event); got -= len(event) {
					recv <- struct{}{}
				}
				return nil
			})
			var body io.Reader = resp.Body
			if mode == "Read" {
				body = readOnly{resp.Body}
			}
			done := make(chan error, 1)
			// Owner: this benchmark; ends with the stream (send closed).
			go func() {
				_, err := io.Copy(w, body)
				done <- err
			}()
			b.ReportAllocs()
			cpu0, cpuKnown := processCPU()
			for b.Loop() {
				send <- struct{}{}
				<-recv
			}
			reportCPU(b, cpu0, cpuKnown)
			close(send)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			<-served
		})
	}
}

// writeFunc is an io.Writer calling a function.
type writeFunc func(p []byte) error

func (f writeFunc) Write(p []byte) (int, error) {
	if err := f(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// reportCPU reports the process's CPU time per iteration since cpu0, where
// the system tells it (known).
func reportCPU(b *testing.B, cpu0 time.Duration, known bool) {
	if cpu1, ok := processCPU(); known && ok {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
