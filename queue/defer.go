package queue

import (
	"context"
	"time"
)

// Deferrer is implemented by deliveries that can put their job back into
// its lane, due after a delay, without counting an attempt: the dispatch
// engine defers the jobs of a tenant over its limit (pacer.tenants) so
// that they do not hold up the other tenants' jobs behind them in the
// lane. Without it, such jobs are held by the replica until their tenant
// may send.
type Deferrer interface {
	// Defer settles the delivery and stores the job again, due after
	// delay (at the back of its lane when delay is not positive), with
	// its attempts unchanged: its next delivery has the same Attempt.
	Defer(ctx context.Context, delay time.Duration) error
}
