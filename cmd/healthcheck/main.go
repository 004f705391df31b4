// Command healthcheck asks an HTTP endpoint whether a process is healthy,
// for container health checks in images that have no shell and no curl
// (the sluice image is distroless). It sends one GET and exits 0 when the
// answer is 2xx, 1 when it is anything else or no answer comes in time, and
// 2 on bad usage.
//
//	healthcheck                                      # http://127.0.0.1:9464/healthz, the dispatcher's
//	healthcheck http://127.0.0.1:9464/readyz         # the dispatcher can reach its queue and Redis
//	healthcheck --timeout 2s http://127.0.0.1:8080/healthz
//
// It follows no redirects, reads at most a few KiB of the answer, and prints
// one line on stderr when the check fails, which Docker keeps in the
// container's health log.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultURL is the dispatcher's liveness endpoint at its default port.
const DefaultURL = "http://127.0.0.1:9464/healthz"

// DefaultTimeout bounds the whole check when --timeout is not given.
const DefaultTimeout = 3 * time.Second

// maxBody bounds how much of the answer is read (and quoted on failure).
const maxBody = 4 << 10

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr))
}

// run is the command: it returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	target, timeout, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := check(ctx, target); err != nil {
		fmt.Fprintf(stderr, "healthcheck: %s: %v\n", target, err)
		return 1
	}
	return 0
}

// parseArgs reads the flags and the optional URL.
func parseArgs(args []string, stderr io.Writer) (string, time.Duration, error) {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", DefaultTimeout, "bound on the whole check")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: healthcheck [--timeout D] [URL]   (URL defaults to %s)\n", DefaultURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return "", 0, err
	}
	if *timeout <= 0 {
		return "", 0, fmt.Errorf("--timeout: must be positive, got %s", *timeout)
	}
	target := DefaultURL
	switch fs.NArg() {
	case 0:
	case 1:
		target = fs.Arg(0)
	default:
		return "", 0, fmt.Errorf("want at most one URL, got %q", fs.Args())
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", 0, fmt.Errorf("URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", 0, fmt.Errorf("URL: want http://host:port/path or https://..., got %q", target)
	}
	return target, *timeout, nil
}

// check sends one GET and returns nil for a 2xx answer.
func check(ctx context.Context, target string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
