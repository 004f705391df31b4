package redisq

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// New refuses a dedup window under a millisecond, naming the key.
func TestNewRefusesSubMillisecondDedupWindow(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	_, err := New(srv.Client(), queue.Config{Name: "q", Lanes: []string{"l"}, DedupWindow: 500 * time.Microsecond})
	if !errors.Is(err, queue.ErrInvalidConfig) || !strings.Contains(err.Error(), "queue.dedup_window") {
		t.Fatalf("got %v, want ErrInvalidConfig naming queue.dedup_window", err)
	}
}

// A positive dedup window under a millisecond that reaches enqueue (past
// validation) is kept for a millisecond, not passed to SET as PX 0, which
// Redis refuses after the batch's earlier jobs were stored: a batch of a
// keyless job then a keyed one is stored whole.
func TestEnqueueRoundsSubMillisecondDedupWindowUp(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	q := openTest(t, srv, "dedup-sub-ms", "c1")
	q.cfg.DedupWindow = 500 * time.Microsecond
	res, err := q.Enqueue(t.Context(),
		&queue.Job{ID: "plain", Lane: "default", Payload: json.RawMessage(`1`)},
		&queue.Job{ID: "keyed", Lane: "default", Key: "k", Payload: json.RawMessage(`2`)})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if len(res) != 2 || res[0].ID != "plain" || res[1].ID != "keyed" || res[0].Duplicate || res[1].Duplicate {
		t.Errorf("Enqueue: got %+v, want plain and keyed stored", res)
	}
	ds := fetchN(t, q, "default", 2)
	if ds[0].Job().ID != "plain" || ds[1].Job().ID != "keyed" {
		t.Errorf("fetched %s, %s; want plain, keyed", ds[0].Job().ID, ds[1].Job().ID)
	}
}
