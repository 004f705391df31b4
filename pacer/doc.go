// Package pacer keeps one schedule of slots for a whole cluster, in Redis,
// so that any number of replicas together send at most Rate requests per
// second to a provider, evenly spaced.
//
// # The algorithm
//
// The schedule is GCRA, the leaky bucket as a meter: one Redis hash per
// provider holds the theoretical arrival time (tat) of the next free slot.
// A Redis call (reserve.lua) grants up to n slots starting at tat, one every
// 1/Rate seconds, and moves tat past them; it never grants a slot further
// ahead of now than Horizon. After an idle spell tat may lag now by at most
// Burst-1 intervals, so at most Burst slots go at once. Time comes from
// Redis TIME inside the script, never from a replica's clock, so clock skew
// between hosts cannot bend the rate; if the Redis clock itself goes back,
// the schedule keeps its distance to now and grants nothing twice.
//
// # Batching
//
// A replica asks for several slots in one call and keeps them locally: at
// high rates Redis round trips per slot fall well below one (the batch
// grows while every slot is used and halves after waste). It asks for more
// before its slots run out, so the schedule runs on without gaps. Slots are
// handed to waiters in order; a slot nobody claims within Grace of its time
// is dropped, never spent late in a bunch, and a slot is never spent twice.
// Slots granted and not used are lost: the cap holds even when a replica
// dies holding slots.
//
// # Control
//
// The configured Rate and Burst travel with every call; an operator's
// override (SetRate, SetBurst, ClearOverrides), Pause/Resume and Throttle (a
// provider's Retry-After: nobody gets a slot for d) are written to the hash
// and reach every replica on its next call, so within one Horizon.
//
// # Failure
//
// When Redis errors or cannot be reached, the pacer grants nothing: Wait
// returns an error wrapping ErrUnavailable and the caller retries with
// backoff. sluice would rather be late than exceed the provider's cap. The
// scripts are re-sent after SCRIPT FLUSH or a restart (EVALSHA, then EVAL).
package pacer
