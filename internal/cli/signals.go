package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
)

// OnSignals answers the signals received on sigs until it is closed. The
// first calls cancel: the command stops cleanly (a replica settles what it
// holds, the producer reports what it stored). The second writes
// second, naming the signal, to stderr and calls exit at once with 128 +
// the signal's number (130 for SIGINT, 143 for SIGTERM), as a shell reports
// a process that a signal ended, without waiting for the clean stop.
func OnSignals(sigs <-chan os.Signal, cancel context.CancelFunc, stderr io.Writer, exit func(code int), second string) {
	first := true
	for sig := range sigs {
		if first {
			first = false
			cancel()
			continue
		}
		fmt.Fprintf(stderr, "%s (second signal: %v)\n", second, sig)
		code := ExitFailure
		if n, ok := sig.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		exit(code)
		return
	}
}
