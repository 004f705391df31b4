// Package dispatch is the engine of one sluice replica: it drains jobs
// from the queue toward the provider, queue → priority → pacer → sink, and
// settles each by the provider's answer.
//
// # Flow
//
// One fetch loop per lane keeps a few jobs fetched ahead of their slots in
// a lane buffer: the lowest lane enough for Config.Lookahead at this
// replica's share of the rate, higher lanes a couple of small chunks, so
// that a burst of privileged jobs is shared by every replica. A job past
// its ExpiresAt is dead-lettered before it can spend a slot, and jobs held
// for a third of the visibility timeout are extended.
//
// The slot loop takes one slot of the cluster-wide schedule at a time
// (Pacer.TakeAhead), and only then picks the job to send, by the lane
// policy (priority.Scheduler), so the job sent is the most urgent one at
// that moment (2ms before the slot, for a sink that holds). A job of cost n takes n slots and is sent at the last. At most
// Config.MaxInFlight requests are open at once.
//
// # Sending on time
//
// The engine hands the sink a gate (sink.WithGate) that the sink runs as
// the last step before it writes the request. The gate refuses a send past
// its slot's deadline (pacer.Slot.Late): the sink writes nothing and
// returns sink.ErrLate, the engine forfeits the slot (Pacer.Forfeit) and
// puts the job back at the front of its lane, with no attempt spent, for a
// later slot. So a stall between the slot and the wire never turns an old
// slot into a request. The gate also records how late each request left
// (sluice_send_lateness_seconds).
//
// A sink that holds (sink.Holder, as the HTTP and log sinks do) gets each
// request a little ahead of its slot (holdAhead, 2ms), with a hold
// (sink.WithHold) that waits for the slot (Pacer.Hold) and that the sink
// runs right before the gate: the job is picked, the request built and a
// connection taken while the slot is still to come, and the request leaves
// the moment it comes. Any other sink gets each request once its slot has
// come.
//
// # Settling
//
// The sink's answer is classified with its sentinels only:
//
//	nil                   ack (in batches when the queue is a queue.BatchAcker)
//	sink.ErrThrottled     the whole cluster holds back (Pacer.Throttle) for the
//	                      Retry-After, within Config.MaxThrottle; the job goes
//	                      back to the front of its lane, no attempt spent
//	sink.ErrPermanent     dead letter, with the answer as the reason
//	sink.ErrLate          forfeit the slot, job back to the front of its lane
//	anything else         retry after an exponential backoff with jitter;
//	                      dead letter when out of attempts
//
// Logs carry a provider's status, never its answer body (sink.LogSafe).
//
// # Shutdown
//
// When Run's context ends the engine stops fetching and taking slots,
// waits up to Config.ShutdownTimeout for requests in flight (then cancels
// them), settles them, and releases the jobs it held unsent back to the
// queue (queue.Releaser), or leaves them to the visibility timeout. A
// request cancelled before the provider answered is no failure of its
// job: the job is released the same way, not retried as a failure (it
// may be delivered twice, as at-least-once allows).
//
// # Depending on little
//
// The engine takes a Queue (Fetch and Stats), a Pacer (TakeAhead, Hold,
// Forfeit, Throttle, Aside) and a sink.Sender: any queue.Queue and *pacer.Pacer will do,
// and tests use in-memory fakes.
package dispatch
