package h1client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
)

// An upstream named by an internationalized domain name is dialled by its
// ASCII (punycode) form, as net/http's Transport dials it and as the Host
// header carries it: the resolver knows no other.
func TestInternationalizedHostIsDialledInASCII(t *testing.T) {
	dialled := make(chan string, 1)
	tr := New(Options{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		dialled <- addr
		return nil, errors.New("no network in this test")
	}})
	defer tr.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://bücher.example:8000/v1/models", nil)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("round trip without a connection succeeded")
	}
	if got, want := <-dialled, "xn--bcher-kva.example:8000"; got != want {
		t.Fatalf("dialled %q, want %q", got, want)
	}
}
