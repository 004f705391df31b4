package redisq_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// Locate pages through a backlog longer than one page, and finds ids that
// hold the characters of a Redis MATCH pattern literally, not as a pattern.
func TestLocateDeepBacklogAndGlobIDs(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	q := open(t, srv, queue.Config{Name: "locate", Lanes: []string{"vip", "default"}})
	jobs := make([]*queue.Job, 1200)
	for i := range jobs {
		jobs[i] = &queue.Job{ID: fmt.Sprintf("job-%04d", i), Payload: json.RawMessage(`1`)}
	}
	if _, err := q.Enqueue(t.Context(), jobs...); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	glob := []*queue.Job{
		{ID: "a*", NotBefore: later, Payload: json.RawMessage(`1`)},
		{ID: "a[*]?\\x", NotBefore: later, Payload: json.RawMessage(`2`)},
	}
	if _, err := q.Enqueue(t.Context(), glob...); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]queue.State{
		"job-1199": queue.StateWaiting, "job-0000": queue.StateWaiting, "a*": queue.StateDelayed,
		"a[*]?\\x": queue.StateDelayed, "a": queue.StateUnknown, "job-1200": queue.StateUnknown,
	} {
		l, err := q.Locate(t.Context(), id)
		if err != nil || l.State != want || (want != queue.StateUnknown && l.Job.ID != id) {
			t.Errorf("Locate(%q): got %s %+v, %v; want %s", id, l.State, l.Job, err, want)
		}
	}
	if st, err := q.Cancel(t.Context(), "a*"); err != nil || st != queue.StateDelayed {
		t.Errorf("Cancel(a*): got %s, %v; want delayed", st, err)
	}
	if l, _ := q.Locate(t.Context(), "a[*]?\\x"); l.State != queue.StateDelayed {
		t.Errorf("after cancelling a*, the other glob id: got %s, want still delayed", l.State)
	}
}
