// Package poll waits in tests for conditions that become true eventually:
// bounded in time, never a bare sleep as synchronisation.
package poll

import (
	"testing"
	"time"
)

// Until checks cond every interval until it holds, and fails the test with
// "after d: not yet <what>" when d passes first.
func Until(t testing.TB, d, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: not yet %s", d, what)
		}
		time.Sleep(every)
	}
}
