package pacer

import "time"

// Slot is a moment of the schedule that a caller waited for and now holds:
// its request may leave from At until Deadline, on this replica's clock.
// Past Deadline the slot is forfeit: the caller gives it up with Forfeit
// and waits for another, so that no stall turns an old slot into a send.
type Slot struct {
	// At is the first moment a request may leave on this slot, on this
	// replica's clock: when the slot falls as the replica's map of the
	// Redis clock places it, plus that map's error bound (at most
	// MaxLateness/4), so that the request never leaves before the slot's
	// true moment.
	At time.Time
	// Deadline is the last moment a request may leave on this slot: the
	// mapped moment plus MaxLateness, less the same error bound, so that
	// it never leaves more than MaxLateness after the true moment.
	Deadline time.Time
	// Stamp is the slot on the Redis clock, its place in the schedule.
	Stamp time.Time
	// Tenant is the limited tenant the slot is granted to (see Tenants):
	// a job of a limited tenant may take the slot only when it is its
	// tenant's. Empty when the slot is granted to no tenant. For n slots
	// taken at once, the first one's.
	Tenant string
}

// Late reports whether now is past the slot's deadline.
func (s Slot) Late(now time.Time) bool { return now.After(s.Deadline) }
