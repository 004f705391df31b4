//go:build linux

package pacer

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// threadSleep sleeps d on the calling OS thread (nanosleep), going on
// after a signal interrupts it (the runtime's preemption signals do).
//
// The thread's timer slack is set to its least first: Linux lets a sleep
// of a normal thread end up to its slack late (50µs by default) so that
// wake-ups can be merged, and this sleep is the end of a slot's wait.
func threadSleep(d time.Duration) {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	for {
		var rest unix.Timespec
		err := unix.Nanosleep(&ts, &rest)
		if !errors.Is(err, unix.EINTR) {
			return
		}
		ts = rest
	}
}
