//go:build !unix

// Command finprobe needs a Unix socket API (see main.go).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "finprobe: Unix only")
	os.Exit(2)
}
