// Package queue holds the job model and the durable queue contract that
// sluice's backends implement: enqueue with validation and dedup, fetch per
// lane, ack, retry after a delay, dead-letter, and redelivery after a
// consumer dies.
//
// Delivery is at least once. A job leaves the queue only when it is settled:
// acked (delivered), dead-lettered (failed for good, expired, or out of
// attempts) or retried (back into its lane, due after a delay). A consumer
// that dies loses nothing: its unsettled jobs are delivered again after the
// visibility timeout.
//
// Backends: queue/redisq (Redis Streams) and queue/natsq (NATS JetStream).
// Both pass the conformance suite in queue/queuetest.
package queue
