// Package queuetest is the conformance suite that every queue backend must
// pass: call Run from the backend's tests with a Factory that opens the
// backend on a real server.
package queuetest

import (
	"testing"

	"github.com/sluicehq/sluice/queue"
)

// Features says what a backend cannot do, so the suite skips or relaxes the
// matching checks. The zero value runs every check, except that
// OriginalIDOnDuplicate, a claim rather than a limit, is only checked when
// set.
type Features struct {
	// OriginalIDOnDuplicate is true when Enqueue of a duplicate returns the
	// id of the job first stored under the key.
	OriginalIDOnDuplicate bool
	// StaleSettleUndetected is true when a backend cannot tell that a
	// delivery's visibility timeout passed and its job went to another
	// consumer, so settling the stale delivery succeeds instead of returning
	// queue.ErrSettled (JetStream acks by stream sequence, not by delivery).
	// The suite then skips the ErrSettled check on stale deliveries.
	StaleSettleUndetected bool
}

// Factory opens a queue on the backend under test with cfg. Calls with the
// same cfg.Name reach the same stored queue, as two replicas do; each call
// returns a separate queue value with its own consumer (cfg.Consumer is set
// by the suite and differs between calls). The factory registers the
// queue's Close, and anything else it started, with t.Cleanup.
type Factory func(t *testing.T, cfg queue.Config) queue.Queue
