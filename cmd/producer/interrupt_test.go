package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
)

// TestInterruptReportsWhatWasStored interrupts a run on NATS while a batch
// is in flight (once the stream has seen cutAt jobs): the batch in flight
// is finished, no other is started (--file sends the jobs it had parsed),
// and the count printed is the count stored, on one line of error.
func TestInterruptReportsWhatWasStored(t *testing.T) {
	const jobs, batch, cutAt = 10_000, 500, 600
	var lines strings.Builder
	for i := range jobs {
		fmt.Fprintf(&lines, `{"payload":{"n":%d}}`+"\n", i)
	}
	file := writeFile(t, "jobs.jsonl", lines.String())
	tests := []struct {
		name string
		mode []string
	}{
		{"file", []string{"--file", file}},
		{"gen", []string{"--gen", fmt.Sprint(jobs)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := testnats.Start(t)
			cfg := writeFile(t, "sluice.yaml", fmt.Sprintf(testConfig, "nats"))
			args := append([]string{"--config", cfg, "--nats-url", srv.URL(), "--batch", fmt.Sprint(batch)}, tc.mode...)

			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			interrupt := cutAfter(t, srv.Conn(), "sluice.sms.ready.*", cutAt, cancel)
			var stdout, stderr bytes.Buffer
			code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
			if !interrupt.Load() {
				t.Fatalf("the run ended (exit %d, %q) before the stream saw %d jobs", code, stdout.String(), cutAt)
			}

			var reported int
			if _, err := fmt.Sscanf(stdout.String(), "enqueued %d", &reported); err != nil {
				t.Fatalf("stdout %q: %v", stdout.String(), err)
			}
			if stored := storedJobs(t, srv.Conn(), "SLUICE_sms"); reported != stored {
				t.Errorf("reported %d jobs enqueued, stored %d", reported, stored)
			}
			// --gen stops between whole batches. --file also sends, on the
			// interrupt, the jobs it had parsed into the next batch (their
			// count depends on when the signal lands), so only the bounds hold.
			if (tc.name == "gen" && reported%batch != 0) || reported < cutAt || reported >= jobs {
				t.Errorf("reported %d jobs enqueued, want at least the %d seen before the interrupt and fewer than %d (whole batches of %d with --gen)", reported, cutAt, jobs, batch)
			}
			if code != 1 || stderr.String() != "producer: interrupted: context canceled\n" {
				t.Errorf("got exit %d, stderr %q, want exit 1 and one line: interrupted", code, stderr.String())
			}
		})
	}
}

// cutAfter calls cancel when n messages have been published on subject,
// and reports whether it did.
func cutAfter(t *testing.T, nc *nats.Conn, subject string, n int64, cancel context.CancelFunc) *atomic.Bool {
	t.Helper()
	var seen atomic.Int64
	var cut atomic.Bool
	sub, err := nc.Subscribe(subject, func(*nats.Msg) {
		if seen.Add(1) == n {
			cut.Store(true)
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("subscribe %s: %v", subject, err)
	}
	if err := nc.Flush(); err != nil { // the server has the subscription
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &cut
}

// storedJobs returns how many messages the stream holds.
func storedJobs(t *testing.T, nc *nats.Conn, stream string) int {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	return int(info.State.Msgs)
}

func TestFlatErrorGivesRepeatedLinesOnce(t *testing.T) {
	canceled := context.Canceled
	tests := []struct {
		err  error
		want string
	}{
		{errors.New("one"), "one"},
		{fmt.Errorf("enqueue: %w", errors.Join(canceled, canceled, canceled)), "enqueue: context canceled; context canceled (2 times)"},
		{errors.Join(errors.New("a"), errors.New("b"), errors.New("a")), "a (2 times); b"},
	}
	for _, tc := range tests {
		err := flatError{tc.err}
		if got := err.Error(); got != tc.want {
			t.Errorf("flatError{%q}: got %q, want %q", tc.err, got, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("flatError{%q} does not match the error it holds", tc.err)
		}
	}
}
