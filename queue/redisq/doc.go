// Package redisq is the Redis Streams backend of sluice's queue: a
// queue.Queue that passes the conformance suite in queue/queuetest.
//
// # Storage
//
// Every key of a queue carries the queue name as its hash tag,
// "sluice:{<name>}:...", so a queue lives in one Redis Cluster slot:
//
//   - lane:<lane>: a stream per lane with one consumer group, "sluice".
//     An entry holds the job as JSON, its id and the attempts made before
//     the entry was added. A delivery's Attempt is those attempts plus the
//     entry's delivery count, so redeliveries after a visibility timeout
//     count as attempts.
//   - delayed:<lane>: a sorted set per lane of the jobs due later (retried
//     with a delay, or with NotBefore in the future), scored by due time.
//     Each Fetch of the lane first moves the due ones into the stream.
//   - dedup:<key>: an idempotency key, set with SET NX PX in the same script
//     as the job's XADD (or ZADD), holding the id first stored under it.
//   - dead and dead-index: the dead letters, a stream read oldest first, and
//     a hash from job id to dead-letter entry, for Requeue.
//
// Every change is one Lua script (one .lua file each, with its KEYS and
// ARGV contract), so it is atomic, and every time comes from Redis' TIME,
// never from a replica's clock. The one exception is the enqueue of a
// single job with no idempotency key and no NotBefore, without
// WithMinReplicas: it is the one XADD the script would run, sent alone
// (a script costs Redis ten times as much, on the way from a producer to
// a waiting fetch: BenchmarkEnqueue).
//
// # Delivery
//
// Fetch takes entries with XREADGROUP, after claiming with XAUTOCLAIM the
// entries whose delivery stayed unsettled past the visibility timeout (their
// consumer died, or is too slow); a claimed entry whose attempt would exceed
// MaxAttempts is dead-lettered instead. When nothing is ready, Fetch blocks
// in XREADGROUP BLOCK for at most half a second at a time, so that it
// notices its context ending, the queue closing and due-later jobs falling
// due; an enqueue wakes it at once.
//
// A settle (Ack, Retry, DeadLetter) acknowledges and deletes the entry, so
// streams hold only ready and in-flight jobs and are never trimmed. It
// succeeds only while the entry is pending for this consumer with the
// delivery count it had when fetched; else it returns queue.ErrSettled.
//
// # Consumers
//
// Each Queue is one consumer of every lane's group, named by
// Config.Consumer (host, process id and a random suffix by default). Close
// removes it where it holds no job; a replica that dies cannot, so a Queue
// that fetches also removes, every quarter of Config.ConsumerIdleLimit (at
// most every 30s, jittered), the other consumers that hold no pending
// entry and have been idle for at least the limit (Sweep). A dead
// replica's pending entries are claimed by the others' fetches after the
// visibility timeout; it then holds none and goes at the next clean-up
// past the limit. Redis counts idle time from a consumer's last read, claim
// or extension; before Redis 7.2 a read that finds nothing does not count,
// so the consumer of a live replica on a lane that has had no job for
// longer than the limit may be removed too: it holds nothing, and its next
// read adds it again. Consumers reports how many each group holds.
//
// # Caveats
//
// A batch Enqueue is atomic per 500 jobs. With client retries enabled
// (go-redis' MaxRetries), a write whose reply was lost (the enqueue
// script, or a plain job's XADD) may run twice: a job without an
// idempotency key may then be stored twice, as at-least-once allows.
// Dead letters stay until requeued.
//
// Redis replication is asynchronous: a failover to a replica loses the
// writes the master had not sent it, enqueues included. WithMinReplicas
// makes Enqueue wait for replicas (WAIT) and fail when they do not
// confirm, so that an acknowledged job survives a failover.
package redisq
