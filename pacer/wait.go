package pacer

import (
	"context"
	"runtime"
	"time"
)

// spinBelow is the wait under which waitFor yields the processor in a loop
// instead of arming a timer: a timer's wake-up costs more than such a wait
// and comes later than it (tens of microseconds), which is lateness.
const spinBelow = 50 * time.Microsecond

// preciseSpan is the end of a precise wait that waitFor sleeps on the OS
// thread (threadSleep) rather than on the runtime's timers. Those wake up
// to a millisecond late on Linux whenever the process is idle, because the
// runtime's poller waits in whole milliseconds: measured on a 2-core
// machine, a 300µs sleep ends 0.78ms late and a 2.3ms one 0.87ms late at
// the median, where a nanosleep ends 0.07–0.12ms late, and 0.045ms late
// with the thread's timer slack at its least (threadSleep sets it; go test
// -run '^$' -bench ThreadSleep ./pacer/ prints both). The span covers
// that millisecond, so a runtime timer armed for all but the span ends
// before the slot.
const preciseSpan = 1200 * time.Microsecond

// waitFor waits until t (now is a recent reading of the clock) and returns
// the time it woke, read once: time.Now is not free on every machine, and
// a slot costs only two readings on the fast path.
//
// When precise, the last preciseSpan of the wait is slept on the OS thread:
// the goroutine blocks in a system call for at most that long, and ctx is
// not watched meanwhile.
func (p *Pacer) waitFor(ctx context.Context, t, now time.Time, precise bool) (time.Time, error) {
	d := t.Sub(now)
	if d >= spinBelow {
		if !precise {
			if err := p.sleepFor(ctx, d); err != nil {
				return time.Time{}, err
			}
			return p.wake(), nil
		}
		if d > preciseSpan {
			if err := p.sleepFor(ctx, d-preciseSpan); err != nil {
				return time.Time{}, err
			}
		} else if err := ctx.Err(); err != nil {
			return time.Time{}, err
		}
		rest := min(t.Sub(p.cfg.Clock.Now()), preciseSpan)
		if rest < spinBelow {
			return p.spinUntil(ctx, t)
		}
		threadSleep(rest)
		return p.wake(), nil
	}
	return p.spinUntil(ctx, t)
}

// wake reads the clock at the end of a wait that slept, after wakeLag.
func (p *Pacer) wake() time.Time {
	if p.wakeLag > 0 {
		threadSleep(p.wakeLag)
	}
	return p.cfg.Clock.Now()
}

// spinUntil yields the processor in a loop until t, for a short wait, and
// returns the time it woke.
func (p *Pacer) spinUntil(ctx context.Context, t time.Time) (time.Time, error) {
	for spins := 0; ; spins++ {
		woke := p.cfg.Clock.Now()
		if !woke.Before(t) {
			return woke, nil
		}
		if err := ctx.Err(); err != nil {
			return time.Time{}, err
		}
		if spins == maxSpins { // a clock that does not move (an injected one): wait as before
			if err := p.sleepFor(ctx, t.Sub(woke)); err != nil {
				return time.Time{}, err
			}
			return p.cfg.Clock.Now(), nil
		}
		runtime.Gosched()
	}
}

// maxSpins bounds waitFor's yielding loop, so that it never depends on the
// clock moving by itself.
const maxSpins = 1000

// sleepFor waits d on the runtime's timers, or until ctx ends.
func (p *Pacer) sleepFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
