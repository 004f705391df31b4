package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/queue"
)

// jobFlags are the flags of one job.
type jobFlags struct {
	id, user, lane, key string
	payload             string
	notBefore           string
	ttl                 time.Duration
	cost                int
}

func (f *jobFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.payload, "payload", "", `the job's payload, JSON: '{"to":"+15550100","text":"hi"}'`)
	fs.StringVar(&f.id, "id", "", "the job's id (default: a new one)")
	fs.StringVar(&f.user, "user", "", "the user the job is for; privileged users' jobs go to the first lane")
	fs.StringVar(&f.lane, "lane", "", "the lane (default: chosen from --user)")
	fs.StringVar(&f.key, "key", "", "idempotency key: the same key within the dedup window is stored once")
	fs.StringVar(&f.notBefore, "not-before", "", "hold the job back until this RFC 3339 time (2026-11-21T10:00:00Z)")
	fs.DurationVar(&f.ttl, "ttl", 0, "the job expires this long from now (expires_at), e.g. 5m")
	fs.IntVar(&f.cost, "cost", 0, "pacer slots the job spends (default 1)")
}

// fieldFlags maps a job's fields to the flags that set them.
var fieldFlags = map[string]string{
	"id": "id", "user": "user", "lane": "lane", "key": "key", "payload": "payload",
	"not_before": "not-before", "expires_at": "ttl", "cost": "cost",
}

// job builds the job the flags describe, at now.
func (f *jobFlags) job(now time.Time) (*queue.Job, error) {
	j := &queue.Job{ID: f.id, User: f.user, Lane: f.lane, Key: f.key, Cost: f.cost, Payload: json.RawMessage(f.payload)}
	if f.notBefore != "" {
		t, err := time.Parse(time.RFC3339Nano, f.notBefore)
		if err != nil {
			return nil, usageErrorf("--not-before: must be an RFC 3339 time (2026-11-21T10:00:00Z), got %q", f.notBefore)
		}
		j.NotBefore = t
	}
	switch {
	case f.ttl < 0:
		return nil, usageErrorf("--ttl: must be positive, got %s", f.ttl)
	case f.ttl > 0:
		j.ExpiresAt = now.Add(f.ttl)
	}
	return j, nil
}

// runOne enqueues the job of the flags and prints its id, followed by
// "duplicate" when a job with its key was stored already.
func runOne(ctx context.Context, g *globals, f jobFlags) error {
	job, err := f.job(time.Now())
	if err != nil {
		return err
	}
	cfg, err := g.load()
	if err != nil {
		return err
	}
	chk, err := checker(cfg)
	if err != nil {
		return err
	}
	if err := chk.Check(job); err != nil {
		return usageErrorf("%s", flagProblems(err))
	}
	s, err := g.open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	res, err := s.p.Enqueue(ctx, job)
	if err != nil {
		return failure(err)
	}
	if res.Duplicate {
		fmt.Fprintln(g.stdout, res.ID, "duplicate")
		return nil
	}
	fmt.Fprintln(g.stdout, res.ID)
	return nil
}

// flagProblems restates a job's validation errors in terms of the flags:
// "--lane: unknown lane ...; --cost: must be between 1 and 100 (queue.max_cost), got -1".
func flagProblems(err error) string {
	var out []string
	for _, e := range problems(err) {
		var fe *queue.FieldError
		if errors.As(e, &fe) && fieldFlags[fe.Field] != "" {
			out = append(out, "--"+fieldFlags[fe.Field]+": "+fe.Reason)
			continue
		}
		out = append(out, e.Error())
	}
	return strings.Join(out, "; ")
}

// problems lists the errors joined in err.
func problems(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// oneLine puts the problems of err on one line, separated by "; ".
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
