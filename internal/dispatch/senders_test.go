package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Senders outlive their request: jobs sent one after another go through
// a handful of senders, not a goroutine each.
func TestSendersServeMoreThanOneRequest(t *testing.T) {
	p := &gatePacer{gate: make(chan struct{})}
	rec := &recorder{}
	h := start(t, Config{MaxInFlight: 4}, twoLanes, p, rec)
	const jobs = 50
	for i := range jobs {
		h.q.Enqueue(context.Background(), job(fmt.Sprintf("j%02d", i), "default", "x"))
	}
	for i := range jobs {
		p.gate <- struct{}{}
		eventually(t, 5*time.Second, fmt.Sprintf("job %d settled", i), func() bool { return h.q.settledCount() == i+1 })
	}
	// One sender would do; a sender still returning from its request
	// when the next slot comes is not idle yet, so allow a few.
	if n := h.e.started.Load(); n > 10 {
		t.Errorf("%d senders started for %d requests sent one after another, want a few", n, jobs)
	}
	t.Logf("%d senders for %d requests", h.e.started.Load(), jobs)
}
