// Command makerunfake stands in for iop-edge and iop-node in the make run
// tests. Once it listens for SIGINT and SIGTERM it notes its pid
// ($FAKE_DIR/<name>.pid), then each of those signals (its name, one a
// line, in $FAKE_DIR/<name>.sig); after the first it notes "stopping"
// and exits once $FAKE_DIR/release exists, or after 25 s. Other signals
// (SIGHUP) have their default action. Signals reach it through a buffered
// channel, so none is lost however close together they come (a shell
// script stand-in lost one under load: bash may take a SIGINT that came
// while a foreground child ran as handled by that child).
package main

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	dir := os.Getenv("FAKE_DIR")
	me := filepath.Base(os.Args[0])
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	at := func(name string) string { return filepath.Join(dir, me+name) }
	if err := os.WriteFile(at(".pid.tmp"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		os.Exit(5)
	}
	if err := os.Rename(at(".pid.tmp"), at(".pid")); err != nil {
		os.Exit(5)
	}
	giveUp := time.After(25 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	stopped := false
	note := func(s os.Signal) {
		name := "TERM"
		if s == syscall.SIGINT {
			name = "INT"
		}
		f, err := os.OpenFile(at(".sig"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			os.Exit(5)
		}
		_, _ = f.WriteString(name + "\n")
		_ = f.Close()
		if !stopped {
			stopped = true
			_ = os.WriteFile(at(".stopping"), nil, 0o644)
		}
	}
	for {
		select {
		case s := <-sigs:
			note(s)
		case <-tick.C:
			if _, err := os.Stat(filepath.Join(dir, "release")); stopped && !errors.Is(err, os.ErrNotExist) {
				for { // note what came with the release
					select {
					case s := <-sigs:
						note(s)
						continue
					default:
					}
					os.Exit(0)
				}
			}
		case <-giveUp:
			os.Exit(0)
		}
	}
}
