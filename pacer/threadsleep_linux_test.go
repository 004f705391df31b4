//go:build linux

package pacer

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadSleep takes its thread's timer slack to the least Linux allows (1ns)
// before it sleeps: with the default 50µs the sleep that ends a slot's wait
// ends that much later than asked.
func TestThreadSleepSetsLeastSlack(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 50_000, 0, 0, 0); err != nil {
		t.Skipf("prctl(PR_SET_TIMERSLACK): %v", err)
	}
	threadSleep(10 * time.Microsecond)
	got, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got != 1 {
		t.Errorf("timer slack after threadSleep: %dns; want 1ns", got)
	}
}

// BenchmarkThreadSleep prints how late a 200µs sleep on the OS thread ends
// (late-µs-p50, late-µs-p99): "50us-slack" as a normal thread sleeps by
// default, "threadSleep" as the pacer's precise wait does.
func BenchmarkThreadSleep(b *testing.B) {
	const d = 200 * time.Microsecond
	for _, c := range []struct {
		name  string
		sleep func(time.Duration)
	}{
		{"50us-slack", func(d time.Duration) {
			_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 50_000, 0, 0, 0)
			ts := unix.NsecToTimespec(int64(d))
			_ = unix.Nanosleep(&ts, nil)
		}},
		{"threadSleep", threadSleep},
	} {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var late []time.Duration
			for b.Loop() {
				start := time.Now()
				c.sleep(d)
				late = append(late, time.Since(start)-d)
			}
			slices.Sort(late)
			at := func(q float64) float64 { return float64(late[int(q*float64(len(late)-1))]) / 1e3 }
			b.ReportMetric(at(0.5), "late-µs-p50")
			b.ReportMetric(at(0.99), "late-µs-p99")
		})
	}
}
