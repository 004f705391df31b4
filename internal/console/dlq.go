package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// ErrNotSupported is returned for an operation the queue's backend does not
// offer (yet): deleting dead letters, locating a job.
var ErrNotSupported = errors.New("not supported by this backend")

// scanLimit bounds the dead letters read to find one by id, or to check
// the expiry of those a requeue names (one beyond it is requeued
// unchecked). Requeueing or deleting them all reads them by pages instead.
const scanLimit = 100_000

// DeadDeleter is a queue that deletes dead letters itself. Queues that do
// not, but locate and cancel jobs (queue.Locator, queue.Canceler), are
// served through those.
type DeadDeleter interface {
	// DeleteDead removes the dead letters with the given job ids for good
	// and returns how many it removed; with no ids it removes every dead
	// letter (purge). An id that is not a dead letter gives an error
	// wrapping queue.ErrNotFound after the others are removed.
	DeleteDead(ctx context.Context, ids ...string) (int, error)
}

// Locator is a queue that locates jobs with the details `job show` shows
// itself; queues with a queue.Locator are served through it.
type Locator interface {
	// Locate finds the job with the given id: where it is (waiting,
	// delayed, in flight, dead, or unknown when the queue no longer holds
	// it) and its attempts, last error and next attempt.
	Locate(ctx context.Context, id string) (Location, error)
}

// Location is where a job is, as Locator finds it.
type Location struct {
	ID          string     `json:"id"`
	State       string     `json:"state"` // waiting | delayed | in_flight | dead | unknown
	Lane        string     `json:"lane,omitempty"`
	Attempt     int        `json:"attempt"`
	LastError   string     `json:"last_error,omitempty"`
	NextAttempt time.Time  `json:"next_attempt,omitzero"` // for a delayed job
	Job         *queue.Job `json:"job,omitempty"`
}

// DeadLetter is a dead letter as the page and `dlq ... --json` show it.
type DeadLetter struct {
	ID         string    `json:"id"`
	Lane       string    `json:"lane"`
	User       string    `json:"user,omitempty"`
	Key        string    `json:"key,omitempty"`
	Attempt    int       `json:"attempt"`
	Reason     string    `json:"reason"` // the provider's answer, whole
	At         time.Time `json:"at"`
	EnqueuedAt time.Time `json:"enqueued_at,omitzero"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	// Expired is true when the job is past its expires_at: requeueing it
	// would dead-letter it again at once.
	Expired      bool            `json:"expired"`
	PayloadBytes int             `json:"payload_bytes"`
	Payload      json.RawMessage `json:"payload,omitempty"` // only when asked for
}

// ViewDead returns d as shown, with its payload when withPayload.
func ViewDead(d queue.DeadLetter, now time.Time, withPayload bool) DeadLetter {
	j := d.Job
	v := DeadLetter{ID: j.ID, Lane: j.Lane, User: j.User, Key: j.Key, Attempt: j.Attempt, Reason: d.Reason, At: d.At,
		EnqueuedAt: j.EnqueuedAt, ExpiresAt: j.ExpiresAt, Expired: j.Expired(now), PayloadBytes: len(j.Payload)}
	if withPayload {
		v.Payload = j.Payload
	}
	return v
}

// FindDead returns the dead letter of job id, or an error wrapping
// queue.ErrNotFound.
func FindDead(ctx context.Context, q queue.DeadLetters, id string) (queue.DeadLetter, error) {
	dead, err := q.ListDead(ctx, scanLimit)
	if err != nil {
		return queue.DeadLetter{}, fmt.Errorf("list dead letters: %w", err)
	}
	for _, d := range dead {
		if d.Job.ID == id {
			return d, nil
		}
	}
	return queue.DeadLetter{}, fmt.Errorf("dead letter %q: %w", id, queue.ErrNotFound)
}

// RequeueResult is what a requeue did.
type RequeueResult struct {
	Requeued int `json:"requeued"`
	// SkippedExpired are the ids left in the dead letters because their
	// jobs are past expires_at: requeued, they would be dead again at once.
	SkippedExpired []string `json:"skipped_expired,omitempty"`
}

// Pages of dead letters read per round by a requeue or delete of them all.
// Variables so that tests can make them small.
var (
	requeuePage = 10_000
	deletePage  = 1_000
)

// Requeue puts the dead letters of ids (all of them when ids is empty)
// back into their lanes, leaving out those whose jobs expired. With no ids
// it works through the dead letters a page at a time until none is left
// but the expired ones, whatever their number; a job requeued once is not
// requeued again by the same call when it comes back dead meanwhile. It
// returns what it did, also on error.
func Requeue(ctx context.Context, q queue.DeadLetters, now time.Time, ids []string) (RequeueResult, error) {
	if len(ids) == 0 {
		return requeueAll(ctx, q, now)
	}
	var res RequeueResult
	dead, err := q.ListDead(ctx, scanLimit)
	if err != nil {
		return res, fmt.Errorf("list dead letters: %w", err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var pick []string
	for _, d := range dead {
		if !want[d.Job.ID] {
			continue
		}
		if d.Job.Expired(now) {
			res.SkippedExpired = append(res.SkippedExpired, d.Job.ID)
		} else {
			pick = append(pick, d.Job.ID)
		}
		delete(want, d.Job.ID)
	}
	for _, id := range ids { // unknown ids: the queue names them in its error
		if want[id] {
			pick = append(pick, id)
		}
	}
	if len(pick) == 0 {
		return res, nil
	}
	res.Requeued, err = q.Requeue(ctx, pick...)
	if err != nil {
		return res, fmt.Errorf("requeue: %w", err)
	}
	return res, nil
}

// requeueAll is Requeue of every dead letter. Each round lists the oldest
// dead letters: those it left before (expired, or requeued once already)
// and a page more, and requeues the new ones that have not expired.
func requeueAll(ctx context.Context, q queue.DeadLetters, now time.Time) (RequeueResult, error) {
	var res RequeueResult
	tried, expired := map[string]bool{}, map[string]bool{}
	left := 0 // dead letters listed and left in place by the last round
	for {
		window := left + requeuePage
		dead, err := q.ListDead(ctx, window)
		if err != nil {
			return res, fmt.Errorf("list dead letters: %w", err)
		}
		var pick []string
		left = 0
		newExpired := false
		for _, d := range dead {
			id := d.Job.ID
			switch {
			case tried[id] || expired[id]:
				left++
			case d.Job.Expired(now):
				expired[id] = true
				res.SkippedExpired = append(res.SkippedExpired, id)
				left++
				newExpired = true
			default:
				tried[id] = true
				pick = append(pick, id)
			}
		}
		if len(pick) == 0 {
			if !newExpired || len(dead) < window {
				return res, nil // nothing new in this round, or the end of the list
			}
			continue // a page of expired ones: look past them
		}
		n, err := q.Requeue(ctx, pick...)
		res.Requeued += n
		// A dead letter that went meanwhile (requeued or deleted by another
		// operator) is not an error of this call.
		if err != nil && !errors.Is(err, queue.ErrNotFound) {
			return res, fmt.Errorf("requeue: %w", err)
		}
	}
}

// Deletes reports whether DeleteDead can delete q's dead letters: q is a
// DeadDeleter, or it locates and cancels jobs (queue.Locator and
// queue.Canceler) and lists its dead letters.
func Deletes(q any) bool {
	if _, ok := q.(DeadDeleter); ok {
		return true
	}
	_, cok := q.(queue.Canceler)
	_, lok := q.(queue.Locator)
	_, iok := q.(deadLister)
	return cok && lok && iok
}

// deadLister lists dead letters, oldest first (queue.DeadLetters.ListDead).
type deadLister interface {
	ListDead(ctx context.Context, limit int) ([]queue.DeadLetter, error)
}

// DeleteDead deletes the dead letters of ids, or all of them when ids is
// empty, when q is a DeadDeleter or else through queue.Locator and
// queue.Canceler; when q is neither it returns ErrNotSupported. It returns
// how many it deleted, also on error. Through Locate and Cancel, an id
// that is not a dead letter (or is in flight) is named in the error after
// the others are deleted; any other error (the backend's, or ctx's end)
// stops it at once. With no ids it works through the dead letters a page
// at a time until none is left, whatever their number.
func DeleteDead(ctx context.Context, q any, ids []string) (int, error) {
	if d, ok := q.(DeadDeleter); ok {
		n, err := d.DeleteDead(ctx, ids...)
		if err != nil {
			return n, fmt.Errorf("delete dead letters: %w", err)
		}
		return n, nil
	}
	c, cok := q.(queue.Canceler)
	l, lok := q.(queue.Locator)
	list, iok := q.(deadLister)
	if !cok || !lok || !iok {
		return 0, fmt.Errorf("delete dead letters: %w", ErrNotSupported)
	}
	del := deletion{l: l, c: c, failed: map[string]bool{}}
	if len(ids) > 0 {
		err := del.each(ctx, ids)
		return del.n, del.result(err)
	}
	for { // purge: the oldest page of those not refused yet, until none is left
		dead, err := list.ListDead(ctx, len(del.failed)+deletePage)
		if err != nil {
			return del.n, del.result(fmt.Errorf("list dead letters: %w", err))
		}
		var page []string
		for _, d := range dead {
			if !del.failed[d.Job.ID] {
				page = append(page, d.Job.ID)
			}
		}
		if len(page) == 0 {
			return del.n, del.result(nil)
		}
		if err := del.each(ctx, page); err != nil {
			return del.n, del.result(err)
		}
	}
}

// deletion is one DeleteDead through Locate and Cancel: what it deleted,
// and the ids it could not delete with why.
type deletion struct {
	l      queue.Locator
	c      queue.Canceler
	n      int
	failed map[string]bool
	errs   []error
}

// each deletes the dead letters of ids. It returns the first error that is
// not about one id (the backend's, or ctx's end) and stops there; an id
// that is not a dead letter, or is in flight, is recorded and skipped.
func (d *deletion) each(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Only a dead letter: a job that is waiting is not this command's.
		loc, err := d.l.Locate(ctx, id)
		if err == nil && loc.State != queue.StateDead {
			err = fmt.Errorf("%w: job %q is %s, not a dead letter", queue.ErrNotFound, id, loc.State)
		}
		if err == nil {
			_, err = d.c.Cancel(ctx, id)
		}
		switch {
		case err == nil:
			d.n++
		case ctx.Err() == nil && (errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrInFlight)):
			d.failed[id] = true
			d.errs = append(d.errs, err)
		default:
			return err
		}
	}
	return nil
}

// result is the error of the deletion: the ids it refused and stop, the
// error that stopped it, if any.
func (d *deletion) result(stop error) error {
	if err := errors.Join(append(d.errs, stop)...); err != nil {
		return fmt.Errorf("delete dead letters: %w", err)
	}
	return nil
}

// Locate finds job id when q is a Locator; else it returns ErrNotSupported.
func Locate(ctx context.Context, q any, id string) (Location, error) {
	if l, ok := q.(Locator); ok {
		loc, err := l.Locate(ctx, id)
		if err != nil {
			return loc, fmt.Errorf("locate job %q: %w", id, err)
		}
		return loc, nil
	}
	l, ok := q.(queue.Locator)
	if !ok {
		return Location{}, fmt.Errorf("locate job: %w", ErrNotSupported)
	}
	found, err := l.Locate(ctx, id)
	if err != nil {
		return Location{ID: id}, fmt.Errorf("locate job %q: %w", id, err)
	}
	loc := Location{ID: id, State: string(found.State), Job: found.Job}
	if j := found.Job; j != nil {
		loc.Lane, loc.Attempt, loc.LastError = j.Lane, j.Attempt, j.LastError
		if found.State == queue.StateDelayed {
			loc.NextAttempt = j.NotBefore
		}
	}
	if found.Reason != "" {
		loc.LastError = found.Reason
	}
	return loc, nil
}
