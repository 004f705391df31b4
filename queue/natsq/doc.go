// Package natsq is the NATS JetStream backend of sluice's queue: a
// queue.Queue built with New on a jetstream.JetStream (the
// github.com/nats-io/nats.go/jetstream API). It uses only JetStream features
// of nats-server 2.9, so older servers work.
//
// # Layout
//
// One work-queue stream per queue, SLUICE_<queue>, file storage, with two
// subjects per lane: sluice.<queue>.ready.<lane> holds the jobs due now and
// sluice.<queue>.delayed.<lane> the jobs due later (a future NotBefore, or a
// Retry with a delay). Its duplicate window is Config.DedupWindow. Each lane
// has a durable pull consumer, lane_<lane>, with explicit acks, an ack wait
// of Config.VisibilityTimeout and no MaxDeliver; a durable consumer named
// delayed reads every delayed subject. Dead letters live in a second stream,
// SLUICEDLQ_<queue> (limits retention, file storage, subject
// sluice.<queue>.dead), which ListDead reads oldest first and Requeue moves
// back into the lanes. The first Release makes a key-value bucket,
// SLUICE_RELEASED_<queue> (see Attempts). New creates what is missing and updates the
// subjects and duplicate window of existing streams, keeping any other
// setting (limits, replicas) an operator gave them; with WithAttach, for an
// admin command or the ingest API, New only looks them up and changes
// nothing. All names are built in names.go.
//
// # Messages
//
// A message body is the job's JSON, as on the wire, with "attempt" holding
// the attempts the job had before this message (omitted when none). Headers
// carry only natsq's own values: Nats-Msg-Id (a hash of the job's
// idempotency key, or an id derived from the message a retry, move, dead
// letter or requeue came from), Sluice-Due on delayed messages and
// Sluice-Dead-At on dead letters.
//
// # Delays
//
// JetStream 2.9 cannot hold a message until a time, so each Queue runs a
// mover, started by its first Fetch and stopped by Close. It pulls from the
// delayed consumer; a job not yet due is nak'ed with a delay (NakWithDelay)
// until its due time, when the server hands it back, and a due job is
// published to its ready subject and then acked. A delayed job therefore
// reaches its lane within a few milliseconds of its due time while some
// replica runs Fetch, and its lane order is the order it became due. If no
// process calls Fetch, delayed jobs stay where they are, counted as Delayed.
//
// # Attempts
//
// Job.Attempt on delivery is the attempts in the body plus the message's
// NumDelivered, less the times it was released (Release, at a replica's
// shutdown), which the key-value bucket SLUICE_RELEASED_<queue> counts per
// message (release.go). A redelivery after a visibility timeout therefore
// counts, a release does not; a job waiting for its NotBefore or its retry
// delay never sits in a lane, so waiting counts nothing. Retry publishes the job again with its current
// attempt in the body and LastError set, then acks the old message. The
// count is exact except that a message the server sent to a pull request
// the client had just abandoned (its context ended in the same instant)
// comes back after the visibility timeout with one attempt more than it
// was given. When Fetch receives a message whose attempt would exceed
// MaxAttempts, it dead-letters the job with the reason "max attempts:
// visibility timeout expired on every attempt" instead of returning it; it
// needs a Fetch on the lane to notice.
//
// # Settling
//
// Every two-step settle (Retry, DeadLetter, a move, Requeue) writes first
// and acks or deletes second, with a message id that makes a repeat of the
// write a duplicate, so a failure between the steps loses nothing and a
// repeat within the dedup window stores nothing twice. Acks are confirmed by
// the server (AckSync). JetStream acks a message by its stream sequence, so
// it cannot tell a consumer that its delivery was redelivered elsewhere; a
// delivery is treated as lost, and every settle returns queue.ErrSettled,
// once 90% of the visibility timeout has passed since it was received or
// last extended. Settling a second time also returns queue.ErrSettled.
//
// # Durability
//
// Enqueue returns after the server's PubAck: the job is in the stream's
// file store, which survives a server restart. The server flushes its files
// to disk on its own schedule (sync_interval, 2 minutes by default), so a
// power loss of a single server may lose recently acknowledged jobs unless
// the server runs with sync_interval: always or in a cluster (WithReplicas).
package natsq
