package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// DeadLetterN fetches n jobs already enqueued to lane of q and
// dead-letters each with reason, failing the test on any error or when
// they are not all fetched within timeout: a way for other packages' tests
// to fill a dead-letter queue through the backend's own paths.
func DeadLetterN(t testing.TB, q queue.Queue, lane string, n int, reason string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for left := n; left > 0; {
		ds, err := q.Fetch(fctx, lane, min(left, 500))
		if err != nil {
			t.Fatalf("fetch %d of %d to dead-letter: %v", left, n, err)
		}
		for _, d := range ds {
			if err := d.DeadLetter(ctx, reason); err != nil {
				t.Fatal(err)
			}
		}
		left -= len(ds)
	}
}
