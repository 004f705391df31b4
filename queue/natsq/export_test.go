package natsq

import "github.com/nats-io/nats.go/jetstream"

// AckSubscribed reports whether q's shared subscription for ack
// confirmations is open (for the tests of package natsq_test).
func AckSubscribed(q *Queue) bool {
	q.acks.mu.Lock()
	defer q.acks.mu.Unlock()
	return q.acks.sub != nil
}

// AckSubscriptions returns how many times q opened its shared
// subscription for ack confirmations.
func AckSubscriptions(q *Queue) int {
	q.acks.mu.Lock()
	defer q.acks.mu.Unlock()
	return q.acks.opened
}

// WrapDelayed replaces q's consumer of delayed jobs with what wrap makes of
// it. Call it before q's first Fetch, which starts the mover.
func WrapDelayed(q *Queue, wrap func(jetstream.Consumer) jetstream.Consumer) {
	q.later = wrap(q.later)
}
