package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
)

// genFlags are the flags of the load generator.
type genFlags struct {
	n     int
	rate  float64
	mix   string
	burst bool
}

func (f *genFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.n, "gen", 0, "generate N synthetic jobs, to load the queue")
	fs.Float64Var(&f.rate, "rate", 0, "with --gen: enqueue so many jobs per second; 0 enqueues as fast as the queue takes them")
	fs.StringVar(&f.mix, "mix", "", "with --gen: shares of the jobs, NAME=SHARE,...: a lane's name puts that share in the lane,\n"+
		"privileged sends it from a privileged user (to the first lane); the rest come from ordinary\n"+
		"users (to the last lane). E.g. vip=0.1 or privileged=0.2,bulk=0.3")
	fs.BoolVar(&f.burst, "burst", false, "with --gen: enqueue every job at once, as fast as possible (--rate 0)")
}

// privilegedKind is the name, in --mix, of the jobs from a privileged user.
const privilegedKind = "privileged"

// kind is one sort of generated job and its share of them.
type kind struct {
	name  string
	share float64
	lane  string // set for a lane of --mix
	user  string // set for privileged and ordinary jobs
	made  int
}

// parseMix reads --mix. A lane's name takes precedence over "privileged".
// The last kind, ordinary users' jobs, gets the share that is left.
func parseMix(mix string, lanes, privileged []string) ([]*kind, error) {
	var kinds []*kind
	total := 0.0
	for item := range strings.SplitSeq(mix, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, v, ok := strings.Cut(item, "=")
		share, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || !(share >= 0 && share <= 1) {
			return nil, fmt.Errorf("--mix: %q: want NAME=SHARE with a share from 0 to 1", item)
		}
		k := &kind{name: name, share: share}
		switch {
		case slices.Contains(lanes, name):
			k.lane, k.user = name, "gen-user"
		case name == privilegedKind && len(privileged) > 0:
			k.user = privileged[0]
		case name == privilegedKind:
			return nil, fmt.Errorf("--mix: %s: queue.privileged_users is empty", name)
		default:
			return nil, fmt.Errorf("--mix: %q is neither a lane (%s) nor %s", name, strings.Join(lanes, ", "), privilegedKind)
		}
		if slices.ContainsFunc(kinds, func(o *kind) bool { return o.name == name }) {
			return nil, fmt.Errorf("--mix: %s given twice", name)
		}
		kinds = append(kinds, k)
		total += share
	}
	if total > 1+1e-9 {
		return nil, fmt.Errorf("--mix: the shares add up to %g, more than 1", total)
	}
	return append(kinds, &kind{name: "ordinary", share: max(0, 1-total), user: "gen-user"}), nil
}

// pick returns the kind of job number i (from 0): the one furthest behind
// its share, so that every prefix of the jobs follows the mix closely and
// the counts come out exact to within one job.
func pick(kinds []*kind, i int) *kind {
	best, behind := kinds[0], math.Inf(-1)
	for _, k := range kinds {
		if d := k.share*float64(i+1) - float64(k.made); d > behind {
			best, behind = k, d
		}
	}
	best.made++
	return best
}

// synthetic returns generated job number i.
func synthetic(k *kind, i int) *queue.Job {
	return &queue.Job{
		Lane:    k.lane,
		User:    k.user,
		Payload: json.RawMessage(fmt.Sprintf(`{"to":"+1555%07d","text":"sluice load test, message %d"}`, i%10_000_000, i)),
	}
}

// runGen enqueues f.n synthetic jobs at f.rate and prints the count and
// the rate achieved.
func runGen(ctx context.Context, g *globals, f genFlags, rateSet bool) error {
	switch {
	case f.n < 1:
		return usageErrorf("--gen: must be at least 1, got %d", f.n)
	case !(f.rate >= 0) || math.IsInf(f.rate, 0):
		return usageErrorf("--rate: must be 0 or more jobs per second, got %g", f.rate)
	case f.burst && rateSet && f.rate > 0:
		return usageErrorf("--burst: sends as fast as possible; it cannot go with --rate %g", f.rate)
	}
	cfg, err := g.load()
	if err != nil {
		return err
	}
	prio := cfg.PriorityConfig()
	kinds, err := parseMix(f.mix, prio.LaneNames(), prio.PrivilegedUsers)
	if err != nil {
		return usageErrorf("%w", err)
	}
	s, err := g.open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	r := &genRun{p: s.p, batch: g.batch, kinds: kinds, lanes: map[string]int{}, bar: g.newProgress(int64(f.n), "enqueuing", false)}
	start := time.Now()
	err = r.run(ctx, f.n, f.rate, start)
	elapsed := time.Since(start)
	r.bar.finish()
	fmt.Fprintln(g.stdout, r.summary(elapsed))
	switch {
	case errors.Is(err, context.Canceled):
		return failure(fmt.Errorf("interrupted: %w", err))
	case err != nil:
		return failure(err)
	}
	return nil
}

// genRun generates and enqueues the jobs.
type genRun struct {
	p     *producer.Producer
	batch int
	kinds []*kind
	bar   *progress
	t     tally
	lanes map[string]int // jobs stored, by lane
}

// run enqueues n jobs, a batch at a time: at rate jobs/s from start, each
// batch holding the jobs due by then, or as fast as possible at rate 0.
//
// A signal (the end of ctx) stops it between batches; the batch in flight
// is not cut short (see inFlight).
func (r *genRun) run(ctx context.Context, n int, rate float64, start time.Time) error {
	for sent := 0; sent < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		due := n
		if rate > 0 {
			due = min(n, int(rate*time.Since(start).Seconds())+1)
			if due <= sent {
				next := start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
				if err := sleep(ctx, time.Until(next)); err != nil {
					return err
				}
				continue
			}
		}
		jobs := make([]*queue.Job, min(due-sent, r.batch))
		for i := range jobs {
			jobs[i] = synthetic(pick(r.kinds, sent+i), sent+i)
		}
		if got, err := r.enqueue(ctx, jobs); err != nil {
			return fmt.Errorf("jobs %d to %d: %d of %d jobs enqueued: %w", sent+1, sent+len(jobs), got, len(jobs), flatError{err})
		}
		sent += len(jobs)
		r.bar.add(len(jobs))
	}
	return nil
}

// enqueue enqueues one batch, even when a signal comes meanwhile (see
// inFlight), counts the jobs stored and returns how many there were.
func (r *genRun) enqueue(ctx context.Context, jobs []*queue.Job) (int, error) {
	ctx, done := inFlight(ctx)
	defer done()
	res, err := r.p.EnqueueBatch(ctx, jobs)
	r.t.count(res)
	for i, x := range res {
		if !x.Duplicate {
			r.lanes[jobs[i].Lane]++
		}
	}
	return len(res), err
}

// summary says how many jobs went into which lane, how fast.
func (r *genRun) summary(elapsed time.Duration) string {
	var lanes []string
	for _, l := range r.p.Lanes() {
		lanes = append(lanes, fmt.Sprintf("%s %d", l, r.lanes[l]))
	}
	rate := float64(r.t.enqueued+r.t.duplicates) / max(elapsed.Seconds(), 1e-9)
	return fmt.Sprintf("enqueued %d in %s: %.0f jobs/s (%s)", r.t.enqueued, elapsed.Round(time.Millisecond), rate, strings.Join(lanes, ", "))
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
