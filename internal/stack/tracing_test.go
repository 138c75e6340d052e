package stack

import (
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/iop-gateway/iop/config"
)

// A trace follows a request from the edge through the node: the node's run
// span is a child of the edge's request span, across the wire.
func TestTraceCrossesTheWire(t *testing.T) {
	edgeRec, nodeRec := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	edgeTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(edgeRec))
	nodeTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(nodeRec))
	e := StartEdge(t, &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "a", Token: "ta", Providers: []config.ProviderSpec{{Name: "m", Type: "mock"}}}},
		Models: []config.ModelSpec{{Name: "demo", Providers: []config.ModelProvider{{Node: "a", Provider: "m", Target: "x"}}}},
	}, EdgeOptions{Tracer: edgeTP})
	StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta", Tracer: nodeTP})
	e.WaitReady(t, "a", 10*time.Second)

	req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"trace me"}]}`))
	// The caller's own trace is continued.
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	WaitFor(t, 5*time.Second, "both spans", func() bool { return len(edgeRec.Ended()) > 0 && len(nodeRec.Ended()) > 0 })
	edgeSpan, nodeSpan := edgeRec.Ended()[0], nodeRec.Ended()[0]
	if got := edgeSpan.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("edge span trace %s: the caller's traceparent was not continued", got)
	}
	if nodeSpan.SpanContext().TraceID() != edgeSpan.SpanContext().TraceID() {
		t.Fatalf("node span in trace %s, edge in %s", nodeSpan.SpanContext().TraceID(), edgeSpan.SpanContext().TraceID())
	}
	if nodeSpan.Parent().SpanID() != edgeSpan.SpanContext().SpanID() {
		t.Fatalf("node span's parent %s is not the edge span %s", nodeSpan.Parent().SpanID(), edgeSpan.SpanContext().SpanID())
	}
	if nodeSpan.Name() != "iop.node.run" {
		t.Fatalf("node span %q", nodeSpan.Name())
	}
}
