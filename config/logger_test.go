package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Every line of a burst of identical messages is written, in both formats.
func TestLogNotSampled(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			zc, err := Log{Level: "info", Format: format}.zapConfig()
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "log")
			zc.OutputPaths = []string{out}
			log, err := zc.Build()
			if err != nil {
				t.Fatal(err)
			}
			const n = 5000
			for range n {
				log.Info("request")
			}
			_ = log.Sync()
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Count(b, []byte("\n")); got != n {
				t.Fatalf("%d of %d lines written", got, n)
			}
		})
	}
}

func TestLogBadLevel(t *testing.T) {
	if _, err := (Log{Level: "loud"}).Build(); err == nil {
		t.Fatal("a bad level was accepted")
	}
}
