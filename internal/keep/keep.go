// Package keep runs tasks on goroutines kept between them. A goroutine
// started per task grows its stack again through whatever the task calls
// (an HTTP client, a Redis client) every time; one kept from task to task
// keeps its stack for the next.
//
// The owner hands each task to a kept goroutine waiting on a channel
// (Hand), and starts one running Loop when none waits:
//
//	if !keep.Hand(ch, t) {
//		go keep.Loop(t, ch, idle, stop, run)
//	}
package keep

import "time"

// Hand gives t to a goroutine waiting in Loop on ch, and reports whether
// one took it. It never blocks: when none waits, the caller starts one.
func Hand[T any](ch chan<- T, t T) bool {
	select {
	case ch <- t:
		return true
	default:
		return false
	}
}

// Loop runs run(t), then each task it receives on ch, one at a time, until
// it has waited idle for a task or stop is closed (a nil stop never is).
func Loop[T any](t T, ch <-chan T, idle time.Duration, stop <-chan struct{}, run func(T)) {
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		run(t)
		timer.Reset(idle)
		select {
		case t = <-ch:
		case <-timer.C:
			return
		case <-stop:
			return
		}
	}
}
