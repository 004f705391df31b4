package queuetest

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// testLocateAndCancel: a backend that implements queue.Locator and
// queue.Canceler tells where each job is (waiting, delayed, in flight,
// dead, unknown), cancels waiting, delayed and dead jobs so that they are
// never delivered, and refuses to cancel a job in flight or an unknown one.
// A backend that implements neither skips it.
func testLocateAndCancel(t *testing.T, h *harness) {
	q := h.open()
	loc, okL := q.(queue.Locator)
	can, okC := q.(queue.Canceler)
	if !okL || !okC {
		t.Skip("the backend implements neither queue.Locator nor queue.Canceler")
	}
	held := newJob(laneHigh, 1)
	dead := newJob(laneHigh, 2)
	waiting := newJob(laneLow, 3)
	delayed := newJob(laneLow, 4)
	delayed.NotBefore = time.Now().Add(time.Hour)
	enqueue(t, q, held, dead, waiting, delayed)
	ds := fetchN(t, q, laneHigh, 2)
	if err := ds[1].DeadLetter(t.Context(), "provider said no"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	for _, c := range []struct {
		name string
		id   string
		want queue.State
	}{
		{"held", ds[0].Job().ID, queue.StateInFlight},
		{"dead", dead.ID, queue.StateDead},
		{"waiting", waiting.ID, queue.StateWaiting},
		{"delayed", delayed.ID, queue.StateDelayed},
		{"unknown", "no-such-job", queue.StateUnknown},
	} {
		l, err := loc.Locate(t.Context(), c.id)
		if err != nil {
			t.Fatalf("Locate %s: %v", c.name, err)
		}
		if l.State != c.want {
			t.Errorf("Locate %s: got %s, want %s", c.name, l.State, c.want)
		}
		if c.want != queue.StateUnknown && (l.Job == nil || l.Job.ID != c.id) {
			t.Errorf("Locate %s: got job %+v, want the job with id %s", c.name, l.Job, c.id)
		}
		if c.want == queue.StateDead && l.Reason != "provider said no" {
			t.Errorf("Locate dead: got reason %q, want the dead letter's", l.Reason)
		}
	}
	for _, c := range []struct {
		id   string
		want queue.State
	}{{waiting.ID, queue.StateWaiting}, {delayed.ID, queue.StateDelayed}, {dead.ID, queue.StateDead}} {
		st, err := can.Cancel(t.Context(), c.id)
		if err != nil || st != c.want {
			t.Errorf("Cancel %s job: got %s, %v; want %s, nil", c.want, st, err, c.want)
		}
		if l, err := loc.Locate(t.Context(), c.id); err != nil || l.State != queue.StateUnknown {
			t.Errorf("Locate after Cancel of the %s job: got %s, %v; want unknown", c.want, l.State, err)
		}
	}
	if _, err := can.Cancel(t.Context(), ds[0].Job().ID); !errors.Is(err, queue.ErrInFlight) {
		t.Errorf("Cancel of a job in flight: got %v, want ErrInFlight", err)
	}
	if _, err := can.Cancel(t.Context(), "no-such-job"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Cancel of an unknown job: got %v, want ErrNotFound", err)
	}
	if _, err := can.Cancel(t.Context(), waiting.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Cancel twice: got %v, want ErrNotFound", err)
	}
	if err := ds[0].Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	expectNone(t, q, laneLow, quiet)
	if dl, err := q.ListDead(t.Context(), 10); err != nil || len(dl) != 0 {
		t.Errorf("dead letters after cancelling the only one: got %d, %v; want none", len(dl), err)
	}
}
