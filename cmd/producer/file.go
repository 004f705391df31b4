package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
)

// fileFlags are the flags of --file.
type fileFlags struct {
	path   string
	strict bool
}

func (f *fileFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.path, "file", "", fmt.Sprintf("enqueue the JSON jobs of this file, one per line (- for stdin); a batch goes out when it holds --batch jobs or %s after its first", linger))
	fs.BoolVar(&f.strict, "strict", false, "with --file: enqueue nothing when any line is bad (the jobs are held in memory until the end)")
}

// lineSlack is what a line may hold besides its payload: the other fields.
const lineSlack = 64 << 10

// tally counts what became of the jobs: stored, recognised as duplicates
// (not stored again) and refused.
type tally struct{ enqueued, duplicates, refused int }

func (t tally) String() string {
	return fmt.Sprintf("enqueued %d, duplicates %d, refused %d", t.enqueued, t.duplicates, t.refused)
}

// count adds the results of an enqueue call.
func (t *tally) count(res []queue.EnqueueResult) {
	for _, r := range res {
		if r.Duplicate {
			t.duplicates++
		} else {
			t.enqueued++
		}
	}
}

// pending is a good line's job, waiting for its batch.
type pending struct {
	line int
	job  *queue.Job
}

// fileRun enqueues the lines of one input.
type fileRun struct {
	g      *globals
	p      *producer.Producer
	strict bool
	bar    *progress
	t      tally
	batch  []pending
	// maxLine is the longest line accepted, in bytes (lineReader's max),
	// for the message about a longer one.
	maxLine int
}

// runFile enqueues the jobs of a file of JSON lines in batches, reports
// each bad line with its number on stderr, and prints a summary.
func runFile(ctx context.Context, g *globals, f fileFlags) error {
	in, size, err := g.openInput(f.path)
	if err != nil {
		return err
	}
	defer in.Close()
	cfg, err := g.load()
	if err != nil {
		return err
	}
	s, err := g.open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	r := &fileRun{g: g, p: s.p, strict: f.strict, bar: g.newProgress(size, "enqueuing", true)}
	err = r.run(ctx, newLineReader(in, s.cfg.Queue.MaxPayloadBytes+lineSlack))
	r.bar.finish()
	fmt.Fprintln(g.stdout, r.t)
	return r.result(err)
}

// run reads the input on a goroutine of its own (see feed) and enqueues
// its jobs. At the end of the input it enqueues what is left (see finish).
// On a signal (the end of ctx) or a read error it stops reading and still
// enqueues the jobs parsed (see sendParsed): it returns without waiting
// for the rest of the input or for a line partly read.
func (r *fileRun) run(ctx context.Context, lr *lineReader) error {
	lines, stop := make(chan line), make(chan struct{})
	defer close(stop)
	go lr.feed(lines, stop)
	r.maxLine = lr.max
	err := r.read(ctx, lines)
	if err == nil {
		return r.finish(ctx)
	}
	// A batch that failed is not kept (see send): after an error of the
	// queue there is nothing left to send.
	if serr := r.sendParsed(ctx); serr != nil {
		return fmt.Errorf("%w; %w", err, serr)
	}
	return err
}

// openInput opens the file of --file, or stdin for "-", and returns its
// size when known (else -1).
func (g *globals) openInput(path string) (io.ReadCloser, int64, error) {
	if path == "-" {
		return io.NopCloser(g.stdin), -1, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, usageErrorf("--file: %w", err)
	}
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return f, size, nil
}

// linger is how long a batch waits for more jobs after its first one:
// a batch goes out when it holds --batch jobs or linger after its first
// job, whichever comes first. A file fills its batches long before; a
// slow pipe (app | producer --file -) has each job stored about linger
// after its line came, instead of held until --batch lines have come.
// With --strict there is no linger: nothing goes out before the end.
const linger = 100 * time.Millisecond

// read parses and checks the lines handed over on lines, and enqueues the
// good ones a batch at a time (see linger; with --strict, nothing before
// the end: see finish). It returns nil at the end of the input, ctx's
// error on a signal, or the error of the input or of the queue. A signal
// is seen before any line waiting: no line is taken once it came.
func (r *fileRun) read(ctx context.Context, lines <-chan line) error {
	timer := time.NewTimer(linger)
	timer.Stop()
	defer timer.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			if err := r.send(ctx); err != nil {
				return err
			}
		case l := <-lines:
			if errors.Is(l.err, io.EOF) {
				return nil
			}
			if l.err != nil {
				return l.err
			}
			added := r.take(l)
			switch {
			case r.strict || !added: // a blank or refused line neither sends nor restarts the linger
			case len(r.batch) >= r.g.batch:
				timer.Stop()
				if err := r.send(ctx); err != nil {
					return err
				}
			case len(r.batch) == 1:
				timer.Reset(linger)
			}
		}
	}
}

// take parses and checks one line: a good one joins the batch (added), a
// bad one is reported.
func (r *fileRun) take(l line) (added bool) {
	r.bar.add(l.size)
	if l.tooLong {
		r.refuse(l.n, fmt.Sprintf("job: longer than %d bytes (the payload limit, queue.max_payload_bytes, and %d bytes for the other fields)", r.maxLine, lineSlack))
		return false
	}
	if len(l.text) == 0 {
		return false
	}
	job, err := producer.ParseJob(l.text)
	if err == nil {
		err = r.p.Check(job)
	}
	if err != nil {
		r.refuse(l.n, oneLine(err))
		return false
	}
	r.batch = append(r.batch, pending{line: l.n, job: job})
	return true
}

// send enqueues the batch built so far, and starts the next one, also
// when it failed.
func (r *fileRun) send(ctx context.Context) error {
	if len(r.batch) == 0 {
		return nil
	}
	err := r.flush(ctx, r.batch)
	r.batch = r.batch[:0]
	return err
}

// sendParsed enqueues the jobs parsed before a signal or a read error
// stopped the reading: at most one batch, as a full batch goes out at
// once. The end of ctx does not stop it (see inFlight). With --strict it
// sends nothing: the rest of the input was never checked.
func (r *fileRun) sendParsed(ctx context.Context) error {
	if r.strict {
		return nil
	}
	return r.send(ctx)
}

// finish enqueues what is left, unless --strict found a bad line.
func (r *fileRun) finish(ctx context.Context) error {
	if r.strict && r.t.refused > 0 {
		return nil
	}
	for len(r.batch) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(r.batch), r.g.batch)
		if err := r.flush(ctx, r.batch[:n]); err != nil {
			return err
		}
		r.batch = r.batch[n:]
	}
	return nil
}

// refuse reports a bad line.
func (r *fileRun) refuse(line int, why string) {
	r.t.refused++
	r.bar.report(r.g.stderr, fmt.Sprintf("line %d: %s", line, why))
}

// flush enqueues one batch. Each line was checked already; should the
// queue still refuse the batch, its jobs are enqueued one by one, so that
// the bad lines are named and the good ones stored. A signal (the end of
// ctx) does not cut the batch short: see inFlight.
func (r *fileRun) flush(ctx context.Context, batch []pending) error {
	ctx, done := inFlight(ctx)
	defer done()
	jobs := make([]*queue.Job, len(batch))
	for i, p := range batch {
		jobs[i] = p.job
	}
	res, err := r.p.EnqueueBatch(ctx, jobs)
	r.t.count(res)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrInvalidJob) && len(res) == 0 && !r.strict:
		return r.oneByOne(ctx, batch)
	default:
		return fmt.Errorf("lines %d to %d: %d of %d jobs enqueued: %w", batch[0].line, batch[len(batch)-1].line, len(res), len(batch), flatError{err})
	}
}

// inFlightLimit is how long a batch in flight may go on after a signal.
const inFlightLimit = 10 * time.Second

// inFlight returns the context for one batch: it keeps ctx's values but
// not its end (a signal), so that the batch is not abandoned while the
// queue stores it and the count printed is what was stored; it ends
// inFlightLimit after ctx ends, or when done is called. The caller stops
// before the next batch.
func inFlight(ctx context.Context) (batch context.Context, done func()) {
	batch, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(inFlightLimit)
		defer t.Stop()
		select {
		case <-batch.Done():
		case <-t.C:
			cancel()
		}
	})
	return batch, func() {
		stop()
		cancel()
	}
}

// flatError is an error on one line: the lines of errors.Join are joined
// with "; ", and a line repeated (the same failure of many jobs) is given
// once, with its count.
type flatError struct{ err error }

func (e flatError) Unwrap() error { return e.err }

func (e flatError) Error() string {
	var lines []string
	count := map[string]int{}
	for l := range strings.SplitSeq(e.err.Error(), "\n") {
		if count[l]++; count[l] == 1 {
			lines = append(lines, l)
		}
	}
	for i, l := range lines {
		if n := count[l]; n > 1 {
			lines[i] = fmt.Sprintf("%s (%d times)", l, n)
		}
	}
	return strings.Join(lines, "; ")
}

func (r *fileRun) oneByOne(ctx context.Context, batch []pending) error {
	for _, p := range batch {
		res, err := r.p.Enqueue(ctx, p.job)
		switch {
		case errors.Is(err, queue.ErrInvalidJob):
			r.refuse(p.line, oneLine(err))
		case err != nil:
			return fmt.Errorf("line %d: %w", p.line, err)
		default:
			r.t.count([]queue.EnqueueResult{res})
		}
	}
	return nil
}

// result turns the run's outcome into the exit code's error.
func (r *fileRun) result(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return failure(fmt.Errorf("interrupted: %w", err))
	case err != nil:
		return failure(err)
	case r.strict && r.t.refused > 0:
		return failure(fmt.Errorf("--strict: nothing enqueued, %d lines refused", r.t.refused))
	case r.t.refused > 0:
		return failure(fmt.Errorf("%d lines refused", r.t.refused))
	}
	return nil
}
