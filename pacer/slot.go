package pacer

import (
	"context"
	"time"
)

// Slot is a moment of the schedule that a caller waited for and now holds:
// its request may leave from At until Deadline, on this replica's clock.
// Past Deadline the slot is forfeit: the caller gives it up with Forfeit
// and waits for another, so that no stall turns an old slot into a send.
type Slot struct {
	// At is when the slot falls, on this replica's clock.
	At time.Time
	// Deadline is the last moment a request may leave on this slot:
	// At + MaxLateness.
	Deadline time.Time
	// Stamp is the slot on the Redis clock, its place in the schedule.
	Stamp time.Time
}

// Late reports whether now is past the slot's deadline.
func (s Slot) Late(now time.Time) bool { return now.After(s.Deadline) }

// Take is WaitN returning the slot the caller now holds (the last of the n
// it waited for): the caller sends its request only while the slot is not
// Late, and otherwise calls Forfeit.
func (p *Pacer) Take(ctx context.Context, n int) (Slot, error) {
	s, err := p.waitN(ctx, n)
	if err != nil {
		return Slot{}, err
	}
	return s, nil
}

// Forfeit records that the caller could not send on s before its deadline:
// the slot is lost, never spent late.
func (p *Pacer) Forfeit(s Slot) {
	p.forfeitLate.Add(1)
}
