//go:build linux

package pacer

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// threadSleep sleeps d on the calling OS thread (nanosleep), going on
// after a signal interrupts it (the runtime's preemption signals do).
func threadSleep(d time.Duration) {
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
