//go:build !linux

package pacer

import "time"

// threadSleep sleeps d on the runtime's timers (nanosleep is used on Linux).
func threadSleep(d time.Duration) { time.Sleep(d) }
