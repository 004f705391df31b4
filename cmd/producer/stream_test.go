package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
)

// TestPipedJobsAreStoredAsTheyComeAndAnInterruptEndsTheRead feeds --file -
// three lines through a pipe that stays open: they are stored without
// waiting for a batch of 500 or the end of the input. An interrupt while
// the command waits for the rest of a line ends the run at once, and the
// count printed is the count stored; the line begun is not a job.
func TestPipedJobsAreStoredAsTheyComeAndAnInterruptEndsTheRead(t *testing.T) {
	e := newRedisEnv(t)
	pr, pw := io.Pipe()
	t.Cleanup(func() { // ends the command's reader, left blocked on the pipe
		_ = pw.Close()
		_ = pr.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(ctx, e.with("--file", "-"), pr, &stdout, &stderr)
		done <- result{code, stdout.String(), stderr.String()}
	}()
	write := func(s string) { // returns once the command has read s
		t.Helper()
		written := make(chan error, 1)
		go func() {
			_, err := io.WriteString(pw, s)
			written <- err
		}()
		select {
		case err := <-written:
			if err != nil {
				t.Fatal(err)
			}
		case r := <-done:
			t.Fatalf("the command ended before reading its input: exit %d, %q, %q", r.code, r.stdout, r.stderr)
		}
	}

	write(`{"user": "alice", "payload": 1}` + "\n" + `{"payload": 2}` + "\n" + `{"payload": 3}` + "\n")
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the 3 lines piped stored while the pipe is open", func() bool {
		return lanes(t, e.q) == "vip=1 default=2"
	})
	write(`{"payload": 4`) // the command now waits for the rest of the line
	cancel()
	select {
	case r := <-done:
		if want := "enqueued 3, duplicates 0, refused 0\n"; r.code != 1 || r.stdout != want || r.stderr != "producer: interrupted: context canceled\n" {
			t.Errorf("got exit %d, stdout %q, stderr %q; want exit 1, %q and one line: interrupted", r.code, r.stdout, r.stderr, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5s after the interrupt, waiting on the pipe")
	}
	if got, want := lanes(t, e.q), "vip=1 default=2"; got != want {
		t.Errorf("got lanes %s, want %s: the line begun is not a job", got, want)
	}
}

// memQueue keeps the jobs enqueued in memory, with the (bubble's) time of
// their enqueue call.
type memQueue struct {
	mu   sync.Mutex
	jobs []string // the payloads
	at   []time.Duration
	t0   time.Time
}

func (q *memQueue) Enqueue(_ context.Context, jobs ...*queue.Job) ([]queue.EnqueueResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	res := make([]queue.EnqueueResult, len(jobs))
	for i, j := range jobs {
		q.jobs = append(q.jobs, string(j.Payload))
		q.at = append(q.at, time.Since(q.t0))
		res[i] = queue.EnqueueResult{ID: fmt.Sprint(len(q.jobs))}
	}
	return res, nil
}

// stored returns the payloads stored and when, as "1@0s 2@100ms".
func (q *memQueue) stored() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	parts := make([]string, len(q.jobs))
	for i, p := range q.jobs {
		parts[i] = fmt.Sprintf("%s@%s", p, q.at[i])
	}
	return strings.Join(parts, " ")
}

// memRun runs --file with --batch batch on a pipe and a memQueue; call it
// in a synctest bubble. Its fields are the pipe's writer, the queue, the
// fileRun and the channel of its end.
type memRun struct {
	in   *io.PipeWriter
	q    *memQueue
	r    *fileRun
	done chan error
}

func startMemRun(ctx context.Context, t *testing.T, batch int, strict bool) *memRun {
	t.Helper()
	q := &memQueue{t0: time.Now()}
	p, err := producer.New(q, priority.Config{Lanes: []priority.Lane{{Name: "default"}}})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	m := &memRun{in: pw, q: q, done: make(chan error, 1),
		r: &fileRun{g: &globals{batch: batch, stderr: io.Discard}, p: p, strict: strict}}
	go func() {
		m.done <- m.r.run(ctx, newLineReader(pr, 1<<10))
		_ = pr.Close()
	}()
	return m
}

// write writes s into the input; it returns once the run has read it.
func (m *memRun) write(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(m.in, s); err != nil {
		t.Fatal(err)
	}
}

// TestABatchGoesOutWhenFullOrALingerAfterItsFirstJob follows one run on a
// pipe, with --batch 2, on the bubble's clock.
func TestABatchGoesOutWhenFullOrALingerAfterItsFirstJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startMemRun(t.Context(), t, 2, false)
		check := func(want string) {
			t.Helper()
			synctest.Wait()
			if got := m.q.stored(); got != want {
				t.Errorf("at %s: got stored %q, want %q", time.Since(m.q.t0), got, want)
			}
		}
		m.write(t, "{\"payload\": 1}\n{\"payload\": 2}\n{\"payload\": 3}\n")
		check("1@0s 2@0s") // a full batch at once; 3 waits
		time.Sleep(linger - time.Millisecond)
		check("1@0s 2@0s")
		time.Sleep(time.Millisecond)
		check("1@0s 2@0s 3@100ms")
		m.write(t, "{\"payload\": 4}\n\n{\"payload\": 5") // a blank line, and a line begun
		time.Sleep(linger)
		check("1@0s 2@0s 3@100ms 4@200ms") // the linger counts from the batch's first job
		m.write(t, "}\n")
		time.Sleep(linger)
		check("1@0s 2@0s 3@100ms 4@200ms 5@300ms")
		m.write(t, "{\"payload\": 6}\n")
		time.Sleep(linger / 2)
		m.write(t, "\nnot json\n") // a blank and a refused line do not restart the linger
		time.Sleep(linger / 2)
		check("1@0s 2@0s 3@100ms 4@200ms 5@300ms 6@400ms")
		_ = m.in.Close()
		if err := <-m.done; err != nil {
			t.Errorf("got %v at the end of the input, want nil", err)
		}
		if got, want := m.r.t.String(), "enqueued 6, duplicates 0, refused 1"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

// TestAnInterruptSendsTheJobsParsed interrupts a run whose batch holds jobs
// not yet due: they are sent at once, the line begun is not; with --strict
// nothing is sent, as the rest of the input was never checked.
func TestAnInterruptSendsTheJobsParsed(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%t", strict), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				m := startMemRun(ctx, t, 500, strict)
				m.write(t, "{\"payload\": 1}\n{\"payload\": 2}\n{\"payload\": 3")
				synctest.Wait()
				cancel()
				if err := <-m.done; !errors.Is(err, context.Canceled) {
					t.Errorf("got %v, want context.Canceled", err)
				}
				want, tally := "1@0s 2@0s", "enqueued 2, duplicates 0, refused 0"
				if strict {
					want, tally = "", "enqueued 0, duplicates 0, refused 0"
				}
				if got := m.q.stored(); got != want {
					t.Errorf("got stored %q, want %q", got, want)
				}
				if got := m.r.t.String(); got != tally {
					t.Errorf("got %q, want %q", got, tally)
				}
				_ = m.in.Close() // ends the reader, left waiting for the rest of line 3
			})
		})
	}
}

// TestASecondSignalExitsAtOnce: the first signal ends the run's context,
// the second exits with 128 + its number, without waiting for the run.
func TestASecondSignalExitsAtOnce(t *testing.T) {
	tests := []struct {
		second os.Signal
		code   int
	}{
		{syscall.SIGINT, 130},
		{syscall.SIGTERM, 143},
	}
	for _, tc := range tests {
		sigs := make(chan os.Signal)
		ctx, cancel := context.WithCancel(t.Context())
		exits := make(chan int, 2)
		var stderr bytes.Buffer
		done := make(chan struct{})
		go func() {
			defer close(done)
			onSignals(sigs, cancel, &stderr, func(code int) { exits <- code })
		}()
		sigs <- syscall.SIGTERM
		<-ctx.Done()
		sigs <- tc.second
		<-done
		close(exits)
		if got := fmt.Sprint(<-exits, len(exits)); got != fmt.Sprint(tc.code, 0) {
			t.Errorf("then %v: got exit code and more calls %s, want %d and 0", tc.second, got, tc.code)
		}
		if !strings.Contains(stderr.String(), "without waiting for the batch in flight") {
			t.Errorf("then %v: got stderr %q, want it to say the run was not waited for", tc.second, stderr.String())
		}
	}
	// One signal only: the run ends, no exit.
	sigs := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(t.Context())
	sigs <- syscall.SIGINT
	close(sigs)
	onSignals(sigs, cancel, io.Discard, func(code int) { t.Errorf("exit(%d) after one signal", code) })
	if ctx.Err() == nil {
		t.Error("one signal: the run's context did not end")
	}
}
